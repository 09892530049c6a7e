package analyst

// RoutePatterns is every pattern the surface registers, for the OpenAPI
// test.
func RoutePatterns(cfg Config) []string {
	_, mux := newHandler(cfg)
	return mux.patterns
}

// RouteRoles is the role each pattern needs, as routes.go registers it.
func RouteRoles(cfg Config) map[string]Role {
	_, mux := newHandler(cfg)
	return mux.roles
}
