package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/settlehq/settle/telemetry"
)

// knownEnv is every environment variable settle's commands read, taken
// from the env tags of cmd/settle: a deploy file that sets another one
// (a typo) configures nothing.
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../cmd/settle/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("cmd/settle sources: %v", err)
	}
	re := regexp.MustCompile(`env:"([^"]+)"`)
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			for _, name := range strings.Split(string(m[1]), ",") {
				out[name] = true
			}
		}
	}
	for _, must := range []string{"DATABASE_URL", "KAFKA_BROKERS", "SETTLE_ADMIN_ADDR", "SETTLE_KAFKA_SASL_PASSWORD_FILE", "SETTLE_OTLP_ENDPOINT"} {
		if !out[must] {
			t.Fatalf("env tags of cmd/settle lack %s: the scan is broken", must)
		}
	}
	return out
}

// TestCompose loads compose.yaml with the compose-spec loader (the one
// docker compose uses), offline, and checks the topology.
// The analysts' token comes from SETTLE_ADMIN_TOKEN in the environment, with
// no literal, default or insecure setting: without it the load fails.
func TestCompose(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wd, _ := os.Getwd()
	load := func(env types.Mapping) (*types.Project, error) {
		return loader.LoadWithContext(ctx, types.ConfigDetails{WorkingDir: wd,
			ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(wd, "compose.yaml")}},
			Environment: env}, func(o *loader.Options) { o.SetProjectName("settle", true) })
	}
	// The analysts' token comes from the environment (deploy/.env), with
	// no default: without it compose refuses to start, as settle would.
	if _, err := load(types.Mapping{}); err == nil || !strings.Contains(err.Error(), "SETTLE_ADMIN_TOKEN") {
		t.Errorf("compose.yaml loads without SETTLE_ADMIN_TOKEN in the environment (err %v): the token must come from it, never a literal or a default", err)
	}
	const token = "alice=compose-test-token-0123456789"
	p, err := load(types.Mapping{"SETTLE_ADMIN_TOKEN": token})
	if err != nil {
		t.Fatalf("load compose.yaml: %v", err)
	}
	for _, name := range []string{"kafka", "postgres", "settle-migrate", "settle", "otel-collector"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("compose.yaml: no service %s", name)
		}
	}
	env := func(svc, key string) string {
		v := p.Services[svc].Environment[key]
		if v == nil {
			return ""
		}
		return *v
	}
	if roles := env("kafka", "KAFKA_PROCESS_ROLES"); !strings.Contains(roles, "controller") || !strings.Contains(roles, "broker") {
		t.Errorf("kafka: KAFKA_PROCESS_ROLES %q: want KRaft (broker,controller), no ZooKeeper", roles)
	}
	if env("kafka", "KAFKA_ZOOKEEPER_CONNECT") != "" {
		t.Error("kafka: ZooKeeper configured; KRaft needs none")
	}
	s := p.Services["settle"]
	if got := strings.Join(s.Command, " "); got != "run" {
		t.Errorf("settle: command %q, want run", got)
	}
	if dep, ok := s.DependsOn["settle-migrate"]; !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("settle must start after settle-migrate completed successfully: %+v", s.DependsOn)
	}
	if m := p.Services["settle-migrate"]; strings.Join(m.Command, " ") != "migrate" || m.Build == nil || m.Build.Dockerfile != "deploy/Dockerfile" {
		t.Errorf("settle-migrate: command %v build %+v: want migrate, built from deploy/Dockerfile", m.Command, m.Build)
	}
	if u := env("settle", "DATABASE_URL"); !strings.Contains(u, "settle_service") {
		t.Errorf("settle runs as %q: want the least-privileged settle_service, not the owner", u)
	}
	if u := env("settle-migrate", "DATABASE_URL"); !strings.HasPrefix(u, "postgres://postgres:") {
		t.Errorf("settle-migrate: %q: migrations run with the owner's credentials", u)
	}
	if a := env("settle", "SETTLE_ADMIN_ADDR"); !strings.HasPrefix(a, "0.0.0.0:") {
		t.Errorf("settle: SETTLE_ADMIN_ADDR %q: in a container it must listen beyond loopback", a)
	}
	if tok := env("settle", "SETTLE_ADMIN_TOKEN"); tok != token {
		t.Errorf("settle: SETTLE_ADMIN_TOKEN %q, want the environment's %q: beyond loopback the analysts' page needs a token", tok, token)
	}
	for _, name := range []string{"settle", "settle-migrate"} {
		if p.Services[name].Environment["SETTLE_ADMIN_INSECURE"] != nil || strings.Contains(strings.Join(p.Services[name].Command, " "), "--admin-") {
			t.Errorf("%s: the admin listener is configured insecure, or by a flag: %v", name, p.Services[name].Command)
		}
	}
	if !strings.Contains(env("settle", "SETTLE_OTLP_ENDPOINT"), "otel-collector:4318") {
		t.Errorf("settle: traces not sent to the collector")
	}
	if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= 30*time.Second {
		t.Errorf("settle: stop_grace_period %v must exceed SETTLE_SHUTDOWN_TIMEOUT (30s)", s.StopGracePeriod)
	}
	known := knownEnv(t)
	for _, name := range []string{"settle", "settle-migrate"} {
		for k := range p.Services[name].Environment {
			if !known[k] {
				t.Errorf("%s: environment %s is read by no settle flag", name, k)
			}
		}
	}
	for _, f := range []string{"postgres-init.sh", "otel-collector.yaml", "Dockerfile"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("compose.yaml refers to %s: %v", f, err)
		}
	}
	var col map[string]any
	b, _ := os.ReadFile("otel-collector.yaml")
	if err := yaml.UnmarshalStrict(b, &col); err != nil {
		t.Errorf("otel-collector.yaml: %v", err)
	}
}

// docs splits a multi-document YAML file.
func docs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(d, "")) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

// strict decodes doc into v, refusing unknown fields (a misspelt field is
// silently ignored by the API server, so it is an error here).
func strict(t *testing.T, path string, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// scaledObject is the part of KEDA's ScaledObject the manifests use (KEDA's
// Go types pull in a controller runtime; these are its documented fields).
type scaledObject struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   map[string]any   `json:"metadata"`
	Spec       scaledObjectSpec `json:"spec"`
}

type scaledObjectSpec struct {
	ScaleTargetRef struct {
		Name string `json:"name"`
	} `json:"scaleTargetRef"`
	MinReplicaCount *int32 `json:"minReplicaCount"`
	MaxReplicaCount *int32 `json:"maxReplicaCount"`
	PollingInterval int    `json:"pollingInterval"`
	CooldownPeriod  int    `json:"cooldownPeriod"`
	Triggers        []struct {
		Type              string            `json:"type"`
		Metadata          map[string]string `json:"metadata"`
		AuthenticationRef struct {
			Name string `json:"name"`
		} `json:"authenticationRef"`
	} `json:"triggers"`
}

type triggerAuthentication struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
	} `json:"spec"`
}

// TestKubernetesManifests decodes every manifest into the Kubernetes API
// types, strictly, and checks that they fit together: selectors, probes,
// ports, the ConfigMap and Secret they reference, the KEDA target and
// group, least privilege and a grace period longer than the shutdown.
// SETTLE_ADMIN_TOKEN comes from a secretKeyRef, never the ConfigMap or a
// command line.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	var (
		dep    appsv1.Deployment
		svc    corev1.Service
		pdb    policyv1.PodDisruptionBudget
		cm     corev1.ConfigMap
		secret corev1.Secret
		job    batchv1.Job
		so     scaledObject
		ta     triggerAuthentication
	)
	strict(t, "deployment.yaml", docs(t, "k8s/deployment.yaml")[0], &dep)
	strict(t, "service.yaml", docs(t, "k8s/service.yaml")[0], &svc)
	strict(t, "pdb.yaml", docs(t, "k8s/pdb.yaml")[0], &pdb)
	strict(t, "configmap.yaml", docs(t, "k8s/configmap.yaml")[0], &cm)
	strict(t, "secret.example.yaml", docs(t, "k8s/secret.example.yaml")[0], &secret)
	strict(t, "migrate-job.yaml", docs(t, "k8s/migrate-job.yaml")[0], &job)
	sod := docs(t, "k8s/scaledobject.yaml")
	if len(sod) != 2 {
		t.Fatalf("scaledobject.yaml: %d documents, want ScaledObject and TriggerAuthentication", len(sod))
	}
	strict(t, "scaledobject.yaml", sod[0], &so)
	strict(t, "scaledobject.yaml", sod[1], &ta)

	for what, kind := range map[string][2]string{
		"deployment": {dep.APIVersion + " " + dep.Kind, "apps/v1 Deployment"},
		"service":    {svc.APIVersion + " " + svc.Kind, "v1 Service"},
		"pdb":        {pdb.APIVersion + " " + pdb.Kind, "policy/v1 PodDisruptionBudget"},
		"configmap":  {cm.APIVersion + " " + cm.Kind, "v1 ConfigMap"},
		"secret":     {secret.APIVersion + " " + secret.Kind, "v1 Secret"},
		"job":        {job.APIVersion + " " + job.Kind, "batch/v1 Job"},
		"scaled":     {so.APIVersion + " " + so.Kind, "keda.sh/v1alpha1 ScaledObject"},
		"triggeraut": {ta.APIVersion + " " + ta.Kind, "keda.sh/v1alpha1 TriggerAuthentication"},
	} {
		if kind[0] != kind[1] {
			t.Errorf("%s: %s, want %s", what, kind[0], kind[1])
		}
	}

	// Kustomization lists every applied file, and they exist.
	var kz struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
	}
	strict(t, "kustomization.yaml", docs(t, "k8s/kustomization.yaml")[0], &kz)
	for _, r := range kz.Resources {
		if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
			t.Errorf("kustomization.yaml: %v", err)
		}
	}

	// Selectors select the pod template.
	podLabels := labels.Set(dep.Spec.Template.Labels)
	sel := labels.SelectorFromSet(dep.Spec.Selector.MatchLabels)
	if !sel.Matches(podLabels) {
		t.Errorf("deployment selector %v does not match its pods %v", dep.Spec.Selector.MatchLabels, podLabels)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("service selector %v does not match the pods", svc.Spec.Selector)
	}
	if pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("PDB selector does not match the pods")
	}
	if pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil {
		t.Errorf("PDB sets neither minAvailable nor maxUnavailable")
	}

	// The container: probes on the admin port, least privilege.
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("deployment: %d containers, want 1", len(dep.Spec.Template.Spec.Containers))
	}
	c := dep.Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	adminPort := cm.Data["SETTLE_ADMIN_ADDR"][strings.LastIndex(cm.Data["SETTLE_ADMIN_ADDR"], ":")+1:]
	if adminPort == "" || adminPort != itoa(ports["admin"]) || !strings.HasPrefix(cm.Data["SETTLE_ADMIN_ADDR"], "0.0.0.0:") {
		t.Errorf("SETTLE_ADMIN_ADDR %q must listen on all interfaces at the admin port %d", cm.Data["SETTLE_ADMIN_ADDR"], ports["admin"])
	}
	for name, pr := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("%s probe missing", name)
			continue
		}
		want := map[string]string{"liveness": "/livez", "readiness": "/readyz"}[name]
		if pr.HTTPGet.Path != want || pr.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s probe: %s on %s, want %s on admin", name, pr.HTTPGet.Path, pr.HTTPGet.Port.String(), want)
		}
	}
	if strings.Join(c.Args, " ") != "run" {
		t.Errorf("deployment args %v, want run", c.Args)
	}
	for what, pod := range map[string]corev1.PodSpec{"deployment": dep.Spec.Template.Spec, "migrate job": job.Spec.Template.Spec} {
		psc, csc := pod.SecurityContext, pod.Containers[0].SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("%s: runAsNonRoot not set", what)
		}
		if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
			csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.Capabilities == nil || len(csc.Capabilities.Drop) == 0 {
			t.Errorf("%s: container security context must be read-only, no escalation, capabilities dropped", what)
		}
	}
	shutdown, err := time.ParseDuration(cm.Data["SETTLE_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Errorf("SETTLE_SHUTDOWN_TIMEOUT: %v", err)
	}
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds must exceed SETTLE_SHUTDOWN_TIMEOUT %s", shutdown)
	}

	// References: ConfigMap, Secret keys, volumes; known variables only.
	known := knownEnv(t)
	for k := range cm.Data {
		if !known[k] {
			t.Errorf("configmap: %s is read by no settle flag", k)
		}
	}
	secretKey := func(where, name, key string) {
		if name != secret.Name {
			t.Errorf("%s: secret %q, want %q", where, name, secret.Name)
		} else if _, ok := secret.StringData[key]; !ok {
			t.Errorf("%s: secret key %q not in %s", where, key, secret.Name)
		}
	}
	for what, ctr := range map[string]corev1.Container{"deployment": c, "migrate job": job.Spec.Template.Spec.Containers[0]} {
		for _, e := range ctr.Env {
			if !known[e.Name] {
				t.Errorf("%s: env %s is read by no settle flag", what, e.Name)
			}
			if e.Value != "" {
				t.Errorf("%s: env %s has a literal value; secrets and settings come from the Secret and ConfigMap", what, e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secretKey(what+" env "+e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
			}
		}
	}
	// The admin listener is beyond loopback: settle refuses to start
	// without the analysts' tokens, which come from the Secret alone.
	var adminToken *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "SETTLE_ADMIN_TOKEN" {
			adminToken = &c.Env[i]
		}
	}
	if adminToken == nil || adminToken.Value != "" || adminToken.ValueFrom == nil || adminToken.ValueFrom.SecretKeyRef == nil {
		t.Errorf("deployment: SETTLE_ADMIN_TOKEN must come from a secretKeyRef: %+v", adminToken)
	} else if v := secret.StringData[adminToken.ValueFrom.SecretKeyRef.Key]; !regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]*=[^,=]{16,}(,[A-Za-z0-9][A-Za-z0-9._@+-]*=[^,=]{16,})*$`).MatchString(v) {
		t.Errorf("secret %s: %q is not NAME=TOKEN,... with tokens of at least 16 bytes", adminToken.ValueFrom.SecretKeyRef.Key, v)
	}
	for k := range cm.Data {
		if strings.HasPrefix(k, "SETTLE_ADMIN_TOKEN") || k == "SETTLE_ADMIN_INSECURE" {
			t.Errorf("configmap: %s: the analysts' tokens come from the Secret, and the listener is never insecure", k)
		}
	}
	for what, ctr := range map[string]corev1.Container{"deployment": c, "migrate job": job.Spec.Template.Spec.Containers[0]} {
		for _, e := range ctr.Env {
			if e.Name == "SETTLE_ADMIN_INSECURE" {
				t.Errorf("%s: SETTLE_ADMIN_INSECURE set", what)
			}
		}
		if a := strings.Join(append(ctr.Command, ctr.Args...), " "); strings.Contains(a, "--admin-") {
			t.Errorf("%s: admin flags on the command line (%q): a token there is a literal in the manifest", what, a)
		}
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name {
		t.Errorf("deployment envFrom must reference ConfigMap %s", cm.Name)
	}
	if u, _ := secret.StringData["database-url"], 0; !strings.Contains(u, "settle_service") {
		t.Errorf("secret database-url %q: the service connects as settle_service", u)
	}
	mounted := map[string]string{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			for _, it := range v.Secret.Items {
				secretKey("volume "+v.Name, v.Secret.SecretName, it.Key)
			}
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					for _, it := range v.Secret.Items {
						mounted[filepath.Join(m.MountPath, it.Path)] = it.Key
					}
				}
			}
		}
	}
	if f := cm.Data["SETTLE_KAFKA_SASL_PASSWORD_FILE"]; mounted[f] != "kafka-sasl-password" {
		t.Errorf("SETTLE_KAFKA_SASL_PASSWORD_FILE %q is not the mounted kafka-sasl-password (mounted: %v)", f, mounted)
	}

	// KEDA: scales this Deployment on this group's lag on this topic.
	if so.Spec.ScaleTargetRef.Name != dep.Name {
		t.Errorf("ScaledObject targets %q, want %q", so.Spec.ScaleTargetRef.Name, dep.Name)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "kafka" {
		t.Fatalf("ScaledObject: want one kafka trigger: %+v", so.Spec.Triggers)
	}
	tr := so.Spec.Triggers[0]
	for k, want := range map[string]string{"consumerGroup": cm.Data["SETTLE_GROUP"], "topic": cm.Data["SETTLE_TOPIC"],
		"bootstrapServers": cm.Data["KAFKA_BROKERS"]} {
		if tr.Metadata[k] != want {
			t.Errorf("ScaledObject %s %q, want %q (the ConfigMap's)", k, tr.Metadata[k], want)
		}
	}
	if tr.Metadata["lagThreshold"] == "" {
		t.Error("ScaledObject: no lagThreshold")
	}
	if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 1 || so.Spec.MaxReplicaCount == nil {
		t.Error("ScaledObject: minReplicaCount must be at least 1 (the service also relays the outbox), and maxReplicaCount set")
	}
	if tr.AuthenticationRef.Name != ta.Metadata["name"] {
		t.Errorf("ScaledObject authenticationRef %q, TriggerAuthentication %v", tr.AuthenticationRef.Name, ta.Metadata["name"])
	}
	for _, r := range ta.Spec.SecretTargetRef {
		secretKey("TriggerAuthentication "+r.Parameter, r.Name, r.Key)
	}
}

func itoa(i int32) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// exportedMetrics returns the metric names a real /metrics exposes once
// every instrument has recorded something.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	tel, err := telemetry.New(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("telemetry shutdown: %v", err)
		}
	}()
	m := tel.Metrics
	ctx := context.Background()
	m.Record(ctx, "settled", "usage", "", 1)
	m.Record(ctx, "dead_lettered", "", "invalid_json", 1)
	m.Batch(ctx, 10)
	m.Transaction(ctx, time.Millisecond, "ok")
	m.EndToEnd(ctx, time.Now().Add(-time.Second))
	m.Retry(ctx, telemetry.CauseContention)
	m.Published(ctx, "settlements", 1)
	m.Parked(ctx, "message_too_large", 1)
	m.BatchSkipped(ctx, "usage", 0, "batch_too_large")
	m.FetchError(ctx, "usage", 0)
	m.Canary(ctx, "refund", true, 1.5)
	m.Canary(ctx, "refund", false, 0)
	m.CanaryPassed(ctx, time.Now())
	unregister, err := m.RegisterGauges(telemetry.Gauges{
		OutboxBacklog:     func(context.Context) (int64, time.Time, error) { return 1, time.Now(), nil },
		ConflictCasesOpen: func(context.Context) (int64, error) { return 1, nil },
		ConsumerLag: func(context.Context) (map[string]map[int32]int64, error) {
			return map[string]map[int32]int64{"usage": {0: 1}}, nil
		},
		Ready: func(context.Context) bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]bool{}
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name := string(line)
		if i := strings.IndexAny(name, "{ "); i >= 0 {
			name = name[:i]
		}
		out[name] = true
	}
	return out
}

// TestDashboardMetricsExist: every settle_* metric the Grafana dashboard
// queries is one /metrics really exports (names taken from a scrape, not
// from a list that could drift), and every exported settle_* metric is on
// the dashboard.
func TestDashboardMetricsExist(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("grafana/settle-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard: uid %q, %d panels", dash.UID, len(dash.Panels))
	}
	exported := exportedMetrics(t)
	used := map[string]bool{}
	re := regexp.MustCompile(`\bsettle_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range re.FindAllString(tg.Expr, -1) {
				used[name] = true
				if !exported[name] {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, name)
				}
			}
		}
	}
	var missing []string
	for name := range exported {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "settle_") && !used[name] && !used[base+"_bucket"] && !used[base+"_sum"] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("exported but on no panel: %v", missing)
	}
	for _, want := range []string{telemetry.MetricRecords, telemetry.MetricConsumerLag, telemetry.MetricOutboxBacklog, telemetry.MetricConflictCasesOpen} {
		if !exported[want] {
			t.Errorf("/metrics does not export %s (named in telemetry)", want)
		}
	}
}

// TestDockerfileBuildsTheTestedBinary: the image builds ./cmd/settle (the
// binary the tests run), statically, and runs it as a non-root user.
func TestDockerfileBuildsTheTestedBinary(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/settle", "USER nonroot", "distroless/static"} {
		if !strings.Contains(s, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// TestTopicsScript runs topics.sh with Kafka's two tools replaced by stubs
// that log their arguments, and checks what it asks the broker for: every
// topic the service uses, created if missing and altered if present, none
// compacted, and settlements kept for ever (finance verifies its chains
// from the topic alone; docs/operations.md says why). compose.yaml runs the
// script before the service, with automatic topic creation off.
func TestTopicsScript(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	for _, tool := range []string{"kafka-topics.sh", "kafka-configs.sh"} {
		stub := "#!/bin/sh\necho \"" + tool + " $*\" >> " + log + "\n"
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "topics.sh")
	cmd.Env = append(os.Environ(), "KAFKA_BROKERS=127.0.0.1:9092", "KAFKA_BIN="+bin, "KAFKA_CLIENT_CONFIG=client.properties")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("topics.sh: %v\n%s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := string(b)
	var cm corev1.ConfigMap
	strict(t, "configmap.yaml", docs(t, "k8s/configmap.yaml")[0], &cm)
	for _, key := range []string{"SETTLE_TOPIC", "SETTLE_RESULTS_TOPIC", "SETTLE_SETTLEMENTS_TOPIC", "SETTLE_DLQ_TOPIC"} {
		topic := cm.Data[key]
		for _, want := range []string{"kafka-topics.sh --bootstrap-server 127.0.0.1:9092 --command-config client.properties --create --if-not-exists --topic " + topic + " ",
			"--entity-name " + topic + " --add-config cleanup.policy=delete,"} {
			if !strings.Contains(calls, want) {
				t.Errorf("topics.sh does not run %q for %s (%s):\n%s", want, topic, key, calls)
			}
		}
	}
	if strings.Contains(calls, "compact") {
		t.Errorf("topics.sh compacts a topic: compaction keeps a key's newest message only\n%s", calls)
	}
	if !strings.Contains(calls, "--entity-name settlements --add-config cleanup.policy=delete,retention.ms=-1,retention.bytes=-1") {
		t.Errorf("settlements is not kept for ever:\n%s", calls)
	}
	wd, _ := os.Getwd()
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{WorkingDir: wd,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(wd, "compose.yaml")}},
		Environment: types.Mapping{"SETTLE_ADMIN_TOKEN": "alice=compose-test-token-0123456789"}}, func(o *loader.Options) { o.SetProjectName("settle", true) })
	if err != nil {
		t.Fatal(err)
	}
	if dep, ok := p.Services["settle"].DependsOn["kafka-topics"]; !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("settle must start after kafka-topics completed: %+v", p.Services["settle"].DependsOn)
	}
	if v := p.Services["kafka"].Environment["KAFKA_AUTO_CREATE_TOPICS_ENABLE"]; v == nil || *v != "false" {
		t.Errorf("kafka creates topics on first use, with the broker's default retention")
	}
}

// TestAlertRules decodes prometheus/settle-alerts.yaml strictly as a
// Prometheus rules file and checks that every series its expressions name
// is one /metrics exports, and that the canary's failures and its last
// full pass are alerted on.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	strict(t, "settle-alerts.yaml", docs(t, "prometheus/settle-alerts.yaml")[0], &rules)
	exported := exportedMetrics(t)
	re := regexp.MustCompile(`\bsettle_[a-z_]+`)
	used := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v: an alert needs a name, an expression, a severity and a summary", r)
			}
			for _, name := range re.FindAllString(r.Expr, -1) {
				used[name] = true
				if !exported[name] {
					t.Errorf("alert %s queries %s, which /metrics does not export", r.Alert, name)
				}
			}
		}
	}
	for _, want := range []string{telemetry.MetricCanaryFailures, telemetry.MetricCanaryLastPass} {
		if !used[want] {
			t.Errorf("no alert on %s", want)
		}
	}
}
