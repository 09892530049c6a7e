package analyst

// RoutePatterns is every pattern the surface registers, for the OpenAPI
// test.
func RoutePatterns(cfg Config) []string {
	_, mux := newHandler(cfg)
	return mux.patterns
}
