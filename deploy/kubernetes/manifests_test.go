package kubernetes

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"bothy.example.com/bothy/internal/devtools/ociimage"
	"bothy.example.com/bothy/internal/platform/config"
)

// manifests is every object of one rendered overlay, and the example
// Secret, by kind.
type manifests struct {
	namespaces  []corev1.Namespace
	configMaps  []corev1.ConfigMap
	secrets     []corev1.Secret
	services    []corev1.Service
	deployments []appsv1.Deployment
	jobs        []batchv1.Job
	pdbs        []policyv1.PodDisruptionBudget
	policies    []networkingv1.NetworkPolicy
	claims      []corev1.PersistentVolumeClaim
}

// documentSeparator splits a multi-document YAML file.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode decodes one YAML document strictly into the API type its
// apiVersion and kind name, and adds it to m. A field the type does not
// have (a typo, a field of another API version) or a kind this test does
// not know is an error.
func (m *manifests) decode(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		return decodeInto(doc, &m.namespaces)
	case "v1 ConfigMap":
		return decodeInto(doc, &m.configMaps)
	case "v1 Secret":
		return decodeInto(doc, &m.secrets)
	case "v1 Service":
		return decodeInto(doc, &m.services)
	case "apps/v1 Deployment":
		return decodeInto(doc, &m.deployments)
	case "batch/v1 Job":
		return decodeInto(doc, &m.jobs)
	case "policy/v1 PodDisruptionBudget":
		return decodeInto(doc, &m.pdbs)
	case "networking.k8s.io/v1 NetworkPolicy":
		return decodeInto(doc, &m.policies)
	case "v1 PersistentVolumeClaim":
		return decodeInto(doc, &m.claims)
	default:
		return fmt.Errorf("unknown kind %q of apiVersion %q", tm.Kind, tm.APIVersion)
	}
}

// decodeInto decodes doc strictly into a T and appends it to list: the
// one step of decode for every kind, so that a field T does not have is
// an error whatever the kind.
func decodeInto[T any](doc []byte, list *[]T) error {
	var o T
	if err := yaml.UnmarshalStrict(doc, &o); err != nil {
		return err
	}
	*list = append(*list, o)
	return nil
}

// decodeFile decodes every document of one file.
func (m *manifests) decodeFile(name string, data []byte) error {
	for i, doc := range documentSeparator.Split(string(data), -1) {
		if isEmptyDocument(doc) {
			continue
		}
		if err := m.decode([]byte(doc)); err != nil {
			return fmt.Errorf("%s, document %d: %w", name, i+1, err)
		}
	}
	return nil
}

// isEmptyDocument reports whether doc holds only comments and blank lines.
func isEmptyDocument(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// checkDir is the tool module that renders and validates the overlays
// (deploy/kubernetes/check, a module of its own).
const checkDir = "check"

// goTool runs the go command in the tool module with args and returns its
// standard output. The tool's module is not in the repository's go.work,
// and GOFLAGS of make test (-trimpath, -ldflags) are for the server's
// module: both are cleared.
func goTool(t *testing.T, args ...string) []byte {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(gobin, args...)
	cmd.Dir = checkDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s in %s: %v\n%s%s", strings.Join(args, " "), checkDir, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// render renders an overlay (with components) through the tool, which
// validates it first, and returns the YAML stream kubectl apply -k would
// send.
func render(t *testing.T, overlay string, components ...string) []byte {
	t.Helper()
	return goTool(t, append([]string{"run", ".", "render", overlay}, components...)...)
}

// load decodes one rendered overlay (with components) and the example
// Secret, which the overlays leave out so that an apply never overwrites
// the real one.
func load(t *testing.T, overlay string, components ...string) *manifests {
	t.Helper()
	m := &manifests{}
	if err := m.decodeFile(overlay, render(t, overlay, components...)); err != nil {
		t.Fatal(err)
	}
	if len(m.secrets) > 0 {
		t.Errorf("%s renders a Secret: an apply would overwrite the real bothy-database", overlay)
	}
	const example = "example-secret/secret.yaml"
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.decodeFile(example, data); err != nil {
		t.Fatal(err)
	}
	return m
}

// overlays lists the overlay folders.
func overlays(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("overlays/*/kustomization.yaml")
	if err != nil || len(dirs) < 2 {
		t.Fatalf("overlays %v (%v): want dev and prod", dirs, err)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	return dirs
}

// show renders an optional field: its value, or "unset".
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// one returns the single element of list, failing the test otherwise.
func one[T any](t *testing.T, what string, list []T) T {
	t.Helper()
	if len(list) != 1 {
		t.Fatalf("%d %s, want 1", len(list), what)
	}
	return list[0]
}

// TestStrictDecoding proves the decoding strict: a misspelt field and an
// unknown kind fail, so the other tests see every field as Kubernetes
// would.
func TestStrictDecoding(t *testing.T) {
	var m manifests
	typo := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 2\n"
	if err := m.decodeFile("typo.yaml", []byte(typo)); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
	kind := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: x\n"
	if err := m.decodeFile("kind.yaml", []byte(kind)); err == nil {
		t.Error("an unknown kind decoded")
	}
	two := "# a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n---\n"
	if err := m.decodeFile("two.yaml", []byte(two)); err != nil || len(m.namespaces) != 2 {
		t.Errorf("two documents: %v, %d namespaces", err, len(m.namespaces))
	}
}

// TestManifests renders every overlay, alone and with the component
// files-volume (one replica, its files on a volume), and checks the
// properties the deployment relies on.
func TestManifests(t *testing.T) {
	for _, overlay := range overlays(t) {
		t.Run(filepath.Base(overlay), func(t *testing.T) { checkOverlay(t, load(t, overlay)) })
		t.Run(filepath.Base(overlay)+"+files-volume", func(t *testing.T) {
			checkOverlay(t, load(t, overlay, "components/files-volume"))
		})
	}
}

// checkBudget checks the disruption budget of two replicas: it keeps one
// and leaves room to evict the other, and selects the replicas only.
func checkBudget(t *testing.T, pdb policyv1.PodDisruptionBudget, podLabels, jobLabels labels.Set) {
	t.Helper()
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.Type != intstr.Int || pdb.Spec.MinAvailable.IntVal != 1 {
		t.Errorf("minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(podLabels) || sel.Matches(jobLabels) {
		t.Errorf("the budget's selector %v must select the replicas %v and not the Job's pod %v (%v)", pdb.Spec.Selector, podLabels, jobLabels, err)
	}
}

// filesVolume returns the volume of pod that is a PersistentVolumeClaim
// and where c mounts it (the component files-volume), or nil.
func filesVolume(t *testing.T, pod corev1.PodSpec, c corev1.Container) (*corev1.Volume, string) {
	t.Helper()
	for i, v := range pod.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if vm.Name == v.Name {
				return &pod.Volumes[i], vm.MountPath
			}
		}
		t.Fatalf("the claim %s is mounted nowhere", v.PersistentVolumeClaim.ClaimName)
	}
	return nil, ""
}

// checkFilesVolume checks the single replica of the component
// files-volume: one replica on a Recreate rollout (a ReadWriteOnce volume
// follows one pod), no disruption budget (with one replica it would block
// every drain), a claim that exists, the volume the group of the image's
// user, and files.storage the folder where it is mounted.
func checkFilesVolume(t *testing.T, m *manifests, dep appsv1.Deployment, vol *corev1.Volume, mount, storage string) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas %s with a files volume, want 1", show(dep.Spec.Replicas))
	}
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q with a files volume, want Recreate", dep.Spec.Strategy.Type)
	}
	if len(m.pdbs) != 0 {
		t.Errorf("%d disruption budgets with one replica: minAvailable 1 would block every node drain", len(m.pdbs))
	}
	claim := one(t, "claims", m.claims)
	if claim.Name != vol.PersistentVolumeClaim.ClaimName || !slices.Equal(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("claim %s %v, the volume names %s: want it, ReadWriteOnce", claim.Name, claim.Spec.AccessModes, vol.PersistentVolumeClaim.ClaimName)
	}
	if _, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		t.Error("the claim requests no storage")
	}
	if psc := dep.Spec.Template.Spec.SecurityContext; psc == nil || psc.FSGroup == nil || *psc.FSGroup != ociimage.GID {
		t.Errorf("the pod's fsGroup is not %d: the image's user could not write the volume", ociimage.GID)
	}
	if want := "file://" + mount; storage != want {
		t.Errorf("files.storage %q with the volume at %s, want %q", storage, mount, want)
	}
}

// checkOverlay checks one rendered overlay.
func checkOverlay(t *testing.T, m *manifests) {
	ns := one(t, "namespaces", m.namespaces)
	dep := one(t, "deployments", m.deployments)
	job := one(t, "jobs", m.jobs)
	secret := one(t, "secrets", m.secrets)

	// One namespace for all.
	for _, o := range allObjects(m) {
		if o.Namespace != ns.Name {
			t.Errorf("%s is in namespace %q, not %q", o.Name, o.Namespace, ns.Name)
		}
	}

	podLabels := labels.Set(dep.Spec.Template.Labels)
	pod := dep.Spec.Template.Spec
	c := one(t, "containers in the Deployment", pod.Containers)
	vol, mount := filesVolume(t, pod, c)
	checkDeployment(t, dep, vol)

	// The image is the one make image names, in the Deployment and the
	// Job alike.
	checkImage(t, c.Image)
	if jc := one(t, "containers in the Job", job.Spec.Template.Spec.Containers); jc.Image != c.Image {
		t.Errorf("the Job runs %s, the Deployment %s: migrations must come from the release that serves", jc.Image, c.Image)
	}

	cfg, env := replicaConfig(t, m, pod, c)
	apiPort, metricsPort := checkListenPorts(t, cfg, c)
	pooled, direct := checkDatabaseURLs(t, cfg, secret)
	// Files: the root filesystem is read-only and two replicas share no
	// volume, so their files live in an S3-compatible store
	// (docs/operations.md#files); the default folder would stop every pod
	// at start. One replica may keep them on its volume.
	if vol != nil {
		checkFilesVolume(t, m, dep, vol, mount, cfg.String(config.FilesStorage))
	} else if !strings.HasPrefix(cfg.String(config.FilesStorage), "s3://") {
		t.Errorf("files.storage %q: two replicas with a read-only root filesystem need an s3:// store", cfg.String(config.FilesStorage))
	}
	checkProbes(t, c, apiPort)
	checkDrain(t, cfg, pod, c)
	checkResources(t, "Deployment", c)
	checkMemoryLimit(t, c, env)

	jobLabels := checkMigrationJob(t, m, job, c.Image, direct)

	// The disruption budget keeps one replica and leaves room to evict
	// the other.
	if vol == nil {
		checkBudget(t, one(t, "disruption budgets", m.pdbs), podLabels, jobLabels)
	}

	checkServices(t, m.services, c, podLabels, jobLabels, apiPort, metricsPort)
	for _, p := range networkPolicyProblems(one(t, "network policies", m.policies), c, podLabels, jobLabels, apiPort, metricsPort, pooled, direct) {
		t.Error(p)
	}
}

// checkDeployment checks the Deployment: two replicas, rolled one at a
// time without losing one, its selector its pods, its pods secure. (The
// component files-volume, vol not nil, runs one replica instead:
// checkFilesVolume.)
func checkDeployment(t *testing.T, dep appsv1.Deployment, vol *corev1.Volume) {
	t.Helper()
	podLabels := labels.Set(dep.Spec.Template.Labels)
	pod := dep.Spec.Template.Spec
	if vol == nil {
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
			t.Errorf("replicas %s, want 2", show(dep.Spec.Replicas))
		}
		if ru := dep.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
			t.Error("the rollout may take a replica away before its successor is ready: want maxUnavailable 0")
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v (%v)", dep.Spec.Selector, podLabels, err)
	}
	if vol != nil {
		checkPodSecurity(t, "Deployment", pod, vol.Name)
	} else {
		checkPodSecurity(t, "Deployment", pod)
	}
}

// replicaConfig loads the configuration the replicas run on (the image's
// environment, then the container's, on the file of --config) and returns
// it with that environment.
func replicaConfig(t *testing.T, m *manifests, pod corev1.PodSpec, c corev1.Container) (*config.Config, []string) {
	t.Helper()
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q, want serve first", c.Args)
	}
	file, fileKeys := configFile(t, m, pod, c)
	env := environment(t, m, c)
	cfg, err := config.Load(file, env)
	if err != nil {
		t.Fatalf("the replicas' configuration does not load: %v", err)
	}
	// A key of bothy.yaml that the environment overrides would be ignored
	// in silence.
	for _, k := range fileKeys {
		if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, config.EnvName(k)+"=") }) {
			t.Errorf("bothy.yaml sets %s, which %s overrides", k, config.EnvName(k))
		}
	}
	return cfg, env
}

// checkListenPorts checks that the replicas listen on the ports the image
// exposes and the container names http and metrics, and returns them.
func checkListenPorts(t *testing.T, cfg *config.Config, c corev1.Container) (apiPort, metricsPort int32) {
	t.Helper()
	apiPort = listenPort(t, cfg.String(config.ServerAddr))
	metricsPort = listenPort(t, cfg.String(config.MetricsAddr))
	if apiPort != ociimage.APIPort || metricsPort != ociimage.MetricsPort {
		t.Errorf("the replicas listen on %d and %d, the image exposes %d and %d", apiPort, metricsPort, ociimage.APIPort, ociimage.MetricsPort)
	}
	if got, ok := containerPort(c, intstr.FromString("http")); !ok || got != apiPort {
		t.Errorf("container port http is %d (%v), server.addr's port %d", got, ok, apiPort)
	}
	if got, ok := containerPort(c, intstr.FromString("metrics")); !ok || got != metricsPort {
		t.Errorf("container port metrics is %d (%v), metrics.addr's port %d", got, ok, metricsPort)
	}
	return apiPort, metricsPort
}

// checkDatabaseURLs checks the pooled URL and the direct one, PgBouncer in
// transaction mode for the pool, PostgreSQL itself for LISTEN and for
// migrations, and the Secret that holds them; it returns both.
func checkDatabaseURLs(t *testing.T, cfg *config.Config, secret corev1.Secret) (pooled, direct string) {
	t.Helper()
	if !cfg.Bool(config.DatabasePoolerMode) {
		t.Error("database.pooler_mode is false, but database.url goes through PgBouncer")
	}
	pooled, direct = cfg.String(config.DatabaseURL), cfg.String(config.DatabaseListenURL)
	if pooled == "" || direct == "" || pooled == direct {
		t.Errorf("database.url %q and database.listen_url %q: want two different URLs", pooled, direct)
	}
	if cfg.Bool(config.DatabaseAutoMigrate) {
		t.Error("database.auto_migrate is true: replicas would migrate through the pooler; the Job migrates")
	}
	checkSecretURLs(t, secret)
	return pooled, direct
}

// checkProbes checks the probes on the API port: readiness /readyz,
// liveness and startup /healthz.
func checkProbes(t *testing.T, c corev1.Container, apiPort int32) {
	t.Helper()
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{
		{"readiness", "/readyz", c.ReadinessProbe},
		{"liveness", "/healthz", c.LivenessProbe},
		{"startup", "/healthz", c.StartupProbe},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe on %s, want %s", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got, ok := containerPort(c, p.probe.HTTPGet.Port); !ok || got != apiPort {
			t.Errorf("%s probe on port %v, which is not the API port %d", p.name, p.probe.HTTPGet.Port.String(), apiPort)
		}
	}
}

// checkDrain checks the drain: readiness notices it before the listener
// closes, the kubelet waits for it to end, Bothy answers a probe before
// the kubelet gives up on it.
func checkDrain(t *testing.T, cfg *config.Config, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	drain := cfg.Duration(config.ServerDrainDelay)
	shutdown := cfg.Duration(config.ServerShutdownTimeout)
	if rp := c.ReadinessProbe; rp != nil {
		if notice := int64(rp.PeriodSeconds) * int64(rp.FailureThreshold); notice >= int64(drain.Seconds()) {
			t.Errorf("readiness period x failures = %ds, not below server.drain_delay %s", notice, drain)
		}
		if float64(rp.TimeoutSeconds) <= cfg.Duration(config.ServerReadinessTimeout).Seconds() {
			t.Errorf("readiness timeout %ds, not above server.readiness_timeout %s", rp.TimeoutSeconds, cfg.Duration(config.ServerReadinessTimeout))
		}
	}
	if drain >= shutdown {
		t.Errorf("server.drain_delay %s is not below server.shutdown_timeout %s", drain, shutdown)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || float64(*g) <= shutdown.Seconds() {
		t.Errorf("terminationGracePeriodSeconds %s, want above server.shutdown_timeout %s", show(g), shutdown)
	}
}

// checkMigrationJob checks the migration Job: bothy migrate of image on
// the direct URL, once, bounded, one Job per release. It returns the
// labels of the Job's pod.
func checkMigrationJob(t *testing.T, m *manifests, job batchv1.Job, image, direct string) labels.Set {
	t.Helper()
	jpod := job.Spec.Template.Spec
	checkPodSecurity(t, "Job", jpod)
	jc := jpod.Containers[0]
	if !slices.Equal(jc.Args, []string{"migrate"}) {
		t.Errorf("the Job runs %q, want [migrate]", jc.Args)
	}
	if jpod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the Job's restartPolicy %q, want Never", jpod.RestartPolicy)
	}
	if b := job.Spec.BackoffLimit; b == nil || *b < 1 || *b > 6 {
		t.Errorf("the Job's backoffLimit %s, want a few retries", show(b))
	}
	// bothy migrate exits 4 on a schema this image cannot serve: a
	// retry cannot help, so the Job must fail at once on it.
	if !failsJobOn(job, jc.Name, 4) {
		t.Error("the Job has no podFailurePolicy that fails it on exit status 4 (schema newer than the image serves): it would retry a rollback that cannot work")
	}
	if job.Spec.ActiveDeadlineSeconds == nil {
		t.Error("the Job has no activeDeadlineSeconds: a migration stuck on a lock would wait for ever")
	}
	jcfg, err := config.Load("", environment(t, m, jc))
	if err != nil {
		t.Fatalf("the Job's configuration does not load: %v", err)
	}
	if jcfg.String(config.DatabaseURL) != direct {
		t.Errorf("the Job migrates on %q, not the direct URL of the replicas' LISTEN connection %q", jcfg.String(config.DatabaseURL), direct)
	}
	checkResources(t, "Job", jc)
	// One Job per release, named by the tag it migrates to: applying the
	// next release creates a Job instead of failing on the immutable
	// template of the last one, and the finished ones go by themselves.
	if tag := image[strings.LastIndex(image, ":")+1:]; job.Name != "bothy-migrate-"+tag {
		t.Errorf("the Job is named %q, want bothy-migrate-%s after the image's tag", job.Name, tag)
	}
	// The name becomes the job-name label of its pods, so it must be a
	// label value as well as an object name.
	if errs := append(validation.IsDNS1123Subdomain(job.Name), validation.IsValidLabelValue(job.Name)...); len(errs) > 0 {
		t.Errorf("the Job's name %q: %v", job.Name, errs)
	}
	if job.Spec.TTLSecondsAfterFinished == nil {
		t.Error("the Job has no ttlSecondsAfterFinished: every release's Job would stay for ever")
	}
	return labels.Set(job.Spec.Template.Labels)
}

// failsJobOn reports whether job's podFailurePolicy fails the Job at once
// when its container named container exits with status code.
func failsJobOn(job batchv1.Job, container string, code int32) bool {
	p := job.Spec.PodFailurePolicy
	if p == nil {
		return false
	}
	for _, r := range p.Rules {
		if e := r.OnExitCodes; r.Action == batchv1.PodFailurePolicyActionFailJob && e != nil && e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn &&
			(e.ContainerName == nil || *e.ContainerName == container) && slices.Contains(e.Values, code) {
			return true
		}
	}
	return false
}

// checkServices checks the Services: the API without the metrics, the
// metrics apart, both selecting the replicas (podLabels), not the Job's
// pod.
func checkServices(t *testing.T, services []corev1.Service, c corev1.Container, podLabels, jobLabels labels.Set, apiPort, metricsPort int32) {
	t.Helper()
	ports := map[string]int32{}
	for _, s := range services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		if len(s.Spec.Selector) == 0 || !sel.Matches(podLabels) || sel.Matches(jobLabels) {
			t.Errorf("Service %s selects %v: want the replicas %v, not the Job's pod", s.Name, s.Spec.Selector, podLabels)
		}
		for _, p := range s.Spec.Ports {
			target, ok := containerPort(c, p.TargetPort)
			if !ok {
				t.Errorf("Service %s port %s targets %s, which the container does not have", s.Name, p.Name, p.TargetPort.String())
			}
			ports[s.Name+"/"+p.Name] = target
		}
	}
	if ports["bothy/http"] != apiPort || len(ports) != 2 || ports["bothy-metrics/metrics"] != metricsPort {
		t.Errorf("Service ports %v: want bothy/http on %d and bothy-metrics/metrics on %d, nothing else", ports, apiPort, metricsPort)
	}

}

// prometheusLabels are the labels of a Prometheus server's pod as the
// Prometheus operator sets them; the README documents them as the one
// way into the metrics port.
var prometheusLabels = labels.Set{"app.kubernetes.io/name": "prometheus"}

// networkPolicyProblems says where the policy fails to cover the
// replicas and the Job, to let any pod of the cluster reach the API port,
// to let only Prometheus reach the metrics port, or to let the pods reach
// DNS and the database URLs' ports. No problem: nil.
func networkPolicyProblems(np networkingv1.NetworkPolicy, c corev1.Container, podLabels, jobLabels labels.Set, apiPort, metricsPort int32, dbURLs ...string) []string {
	var problems faultList
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(podLabels) || !sel.Matches(jobLabels) {
		problems.addf("NetworkPolicy %s selects %v: want the replicas %v and the Job's pod %v (%v)", np.Name, np.Spec.PodSelector, podLabels, jobLabels, err)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		problems.addf("NetworkPolicy %s has policyTypes %v: want Ingress and Egress", np.Name, np.Spec.PolicyTypes)
	}
	problems.ingressProblems(np, c, podLabels, apiPort, metricsPort)
	problems.egressProblems(np, c, dbURLs)
	return problems
}

// faultList collects the problems networkPolicyProblems finds, each
// formatted as t.Errorf would, so that its phases can add to one list.
type faultList []string

// addf adds one formatted problem.
func (f *faultList) addf(format string, args ...any) {
	*f = append(*f, fmt.Sprintf(format, args...))
}

// ingressProblems adds where the policy's ingress rules fail to open the
// API port to every pod of the cluster, or open the metrics port to
// anything but Prometheus's pods.
func (f *faultList) ingressProblems(np networkingv1.NetworkPolicy, c corev1.Container, podLabels labels.Set, apiPort, metricsPort int32) {
	apiFromCluster := false
	for i, r := range np.Spec.Ingress {
		if portsCover(c, r.Ports, apiPort, corev1.ProtocolTCP) && slices.ContainsFunc(r.From, isWholeCluster) {
			apiFromCluster = true
		}
		if !portsCover(c, r.Ports, metricsPort, corev1.ProtocolTCP) {
			continue
		}
		// A rule that opens the metrics port must name Prometheus's pods:
		// no address block, no rule without peers (everyone), no peer
		// that is a whole namespace.
		if len(r.From) == 0 {
			f.addf("NetworkPolicy %s, ingress rule %d: port %d open to everyone", np.Name, i, metricsPort)
		}
		for _, p := range r.From {
			if opensBeyondPrometheus(p, podLabels) {
				f.addf("NetworkPolicy %s, ingress rule %d: port %d open to %+v, want only pods labelled %v", np.Name, i, metricsPort, p, prometheusLabels)
			}
		}
	}
	if !apiFromCluster {
		f.addf("NetworkPolicy %s: no ingress rule opens port %d to every pod of the cluster (the ingress controller)", np.Name, apiPort)
	}
}

// isWholeCluster reports whether peer p is every pod of every namespace:
// an empty namespace selector and nothing else.
func isWholeCluster(p networkingv1.NetworkPolicyPeer) bool {
	return p.IPBlock == nil && p.PodSelector == nil && p.NamespaceSelector != nil && len(p.NamespaceSelector.MatchLabels)+len(p.NamespaceSelector.MatchExpressions) == 0
}

// opensBeyondPrometheus reports whether peer p, on a rule that opens the
// metrics port, lets in more than Prometheus's pods: an address block, no
// pod selector, an empty or broken one, one that misses Prometheus or
// takes in the replicas.
func opensBeyondPrometheus(p networkingv1.NetworkPolicyPeer, podLabels labels.Set) bool {
	ps, err := metav1.LabelSelectorAsSelector(p.PodSelector)
	return p.IPBlock != nil || p.PodSelector == nil || err != nil || ps.Empty() || !ps.Matches(prometheusLabels) || ps.Matches(podLabels)
}

// egressProblems adds where the policy's egress rules fail to let the
// pods reach DNS and the ports of the database URLs.
func (f *faultList) egressProblems(np networkingv1.NetworkPolicy, c corev1.Container, dbURLs []string) {
	egress := func(port int32, proto corev1.Protocol) bool {
		return slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool { return portsCover(c, r.Ports, port, proto) })
	}
	if !egress(53, corev1.ProtocolUDP) || !egress(53, corev1.ProtocolTCP) {
		f.addf("NetworkPolicy %s: no egress to DNS (53/UDP and 53/TCP)", np.Name)
	}
	for _, raw := range dbURLs {
		u, err := url.Parse(raw)
		if err != nil {
			f.addf("database URL %q: %v", raw, err)
			continue
		}
		port, err := strconv.ParseInt(u.Port(), 10, 32)
		if err != nil {
			port = 5432
		}
		if !egress(int32(port), corev1.ProtocolTCP) {
			f.addf("NetworkPolicy %s: no egress to port %d of %s", np.Name, port, u.Host)
		}
	}
}

// portsCover reports whether the policy ports (empty: every port) include
// port of protocol proto, a named port being the one of container c.
func portsCover(c corev1.Container, ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type == intstr.String {
			if got, ok := containerPort(c, *p.Port); ok && got == port {
				return true
			}
			continue
		}
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		if p.Port.IntVal <= port && port <= end {
			return true
		}
	}
	return false
}

// allObjects returns the metadata of every namespaced object.
func allObjects(m *manifests) []metav1.ObjectMeta {
	var out []metav1.ObjectMeta
	for _, o := range m.configMaps {
		out = append(out, o.ObjectMeta)
	}
	for _, o := range m.secrets {
		out = append(out, o.ObjectMeta)
	}
	for _, o := range m.services {
		out = append(out, o.ObjectMeta)
	}
	for _, o := range m.deployments {
		out = append(out, o.ObjectMeta)
	}
	for _, o := range m.jobs {
		out = append(out, o.ObjectMeta)
	}
	for _, o := range m.pdbs {
		out = append(out, o.ObjectMeta)
	}
	for _, o := range m.policies {
		out = append(out, o.ObjectMeta)
	}
	for _, o := range m.claims {
		out = append(out, o.ObjectMeta)
	}
	return out
}

// checkImage checks that ref names the repository of make image with a
// fixed tag, and that the Makefile still tags with that repository.
func checkImage(t *testing.T, ref string) {
	t.Helper()
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		t.Errorf("image %q has no tag", ref)
		return
	}
	repo, tag := ref[:i], ref[i+1:]
	if repo != ociimage.DefaultRepository {
		t.Errorf("image repository %q, make image builds %q", repo, ociimage.DefaultRepository)
	}
	if tag == "" || tag == "latest" {
		t.Errorf("image tag %q: name a release, so that a rollout changes something", tag)
	}
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`(?m)^IMAGE_REPOSITORY\s*\?=\s*(\S+)`).FindSubmatch(mk)
	if got == nil || string(got[1]) != ociimage.DefaultRepository {
		t.Errorf("the Makefile's IMAGE_REPOSITORY is %q, not %q", got, ociimage.DefaultRepository)
	}
}

// checkPodSecurity checks what the "restricted" Pod Security Standard
// asks and what the image allows: non-root as the image's user, a
// read-only root filesystem with no writable volume but the ones named in
// writable (the files volume), no privilege, the
// runtime's seccomp profile; and no API token or service-link variables,
// which Bothy does not use.
func checkPodSecurity(t *testing.T, what string, pod corev1.PodSpec, writable ...string) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	checkPodIsolation(t, what, pod)
	mounts := map[string]bool{}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s %s: no securityContext", what, c.Name)
			continue
		}
		checkContainerIdentity(t, what, c.Name, psc, sc)
		checkContainerPrivileges(t, what, c.Name, sc)
		for _, vm := range c.VolumeMounts {
			if !vm.ReadOnly && !slices.Contains(writable, vm.Name) {
				t.Errorf("%s %s: volume %s mounted writable; the image needs no writable path", what, c.Name, vm.Name)
			}
			mounts[vm.Name] = true
		}
		if c.ImagePullPolicy == corev1.PullAlways {
			t.Errorf("%s %s: imagePullPolicy Always with a fixed tag", what, c.Name)
		}
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("%s: volume %s is a hostPath", what, v.Name)
		}
		if !mounts[v.Name] {
			t.Errorf("%s: volume %s is mounted nowhere", what, v.Name)
		}
	}
}

// checkPodIsolation checks the pod-wide part of checkPodSecurity: no API
// token, no service-link variables, no host namespace.
func checkPodIsolation(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken not false", what)
	}
	// A Service named bothy gives every pod with service links the
	// variables BOTHY plus _SERVICE_HOST, _PORT, ..., which Bothy warns
	// about at every start.
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks not false", what)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("%s: shares a host namespace", what)
	}
}

// checkContainerIdentity checks who container name runs as, its own
// securityContext sc over the pod's psc: non-root, the image's user and
// group, the runtime's seccomp profile.
func checkContainerIdentity(t *testing.T, what, name string, psc *corev1.PodSecurityContext, sc *corev1.SecurityContext) {
	t.Helper()
	nonRoot, user, group, seccomp := psc.RunAsNonRoot, psc.RunAsUser, psc.RunAsGroup, psc.SeccompProfile
	if sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if sc.RunAsUser != nil {
		user = sc.RunAsUser
	}
	if sc.RunAsGroup != nil {
		group = sc.RunAsGroup
	}
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if nonRoot == nil || !*nonRoot {
		t.Errorf("%s %s: runAsNonRoot not true", what, name)
	}
	if user == nil || *user != ociimage.UID || group == nil || *group != ociimage.GID {
		t.Errorf("%s %s: runs as %s:%s, not the image's user %d:%d", what, name, show(user), show(group), ociimage.UID, ociimage.GID)
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s %s: seccompProfile %v, want RuntimeDefault", what, name, seccomp)
	}
}

// checkContainerPrivileges checks what container name may do beyond its
// user: no privilege escalation, not privileged, a read-only root
// filesystem, every capability dropped and none added.
func checkContainerPrivileges(t *testing.T, what, name string, sc *corev1.SecurityContext) {
	t.Helper()
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s %s: allowPrivilegeEscalation not false", what, name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s %s: privileged", what, name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s %s: readOnlyRootFilesystem not true", what, name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s %s: capabilities %v, want drop [ALL] and nothing added", what, name, sc.Capabilities)
	}
}

// configFile follows the container's --config to the ConfigMap mounted
// there, writes the file into a temporary folder and returns its path and
// its keys (dotted, as in docs/configuration.md).
func configFile(t *testing.T, m *manifests, pod corev1.PodSpec, c corev1.Container) (string, []string) {
	t.Helper()
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("args %q have no --config FILE", c.Args)
	}
	path := c.Args[i+1]
	var volume string
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == filepath.Dir(path) {
			volume = vm.Name
		}
	}
	var cmName string
	for _, v := range pod.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	for _, cm := range m.configMaps {
		if cm.Name != cmName {
			continue
		}
		data, ok := cm.Data[filepath.Base(path)]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s", cm.Name, filepath.Base(path))
		}
		file := filepath.Join(t.TempDir(), "bothy.yaml")
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		var tree map[string]any
		if err := yaml.Unmarshal([]byte(data), &tree); err != nil {
			t.Fatal(err)
		}
		var keys []string
		flattenKeys("", tree, &keys)
		return file, keys
	}
	t.Fatalf("--config %s is on no ConfigMap (volume %q, ConfigMap %q)", path, volume, cmName)
	return "", nil
}

// flattenKeys appends the dotted keys of the leaves of tree to keys.
func flattenKeys(prefix string, tree map[string]any, keys *[]string) {
	for k, v := range tree {
		if sub, ok := v.(map[string]any); ok {
			flattenKeys(prefix+k+".", sub, keys)
			continue
		}
		*keys = append(*keys, prefix+k)
	}
}

// environment returns the environment of container c as the server sees
// it: the image's (ociimage.Env), then the container's, with each Secret
// reference read from the example Secret. Every BOTHY_ variable must be a
// configuration key: others are ignored, with a warning, at every start.
func environment(t *testing.T, m *manifests, c corev1.Container) []string {
	t.Helper()
	known := map[string]bool{}
	for _, k := range config.Registry() {
		known[config.EnvName(k.Name)] = true
	}
	if len(c.EnvFrom) > 0 {
		t.Errorf("container %s takes envFrom: its variable names cannot be checked", c.Name)
	}
	env := slices.Clone(ociimage.Env())
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "BOTHY_") && !known[e.Name] {
			t.Errorf("container %s sets %s, which is no configuration key", c.Name, e.Name)
		}
		value := e.Value
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				t.Errorf("container %s: %s comes from something other than a Secret", c.Name, e.Name)
				continue
			}
			v, ok := secretValue(m, ref.Name, ref.Key)
			if !ok {
				t.Errorf("container %s: %s names key %q of Secret %q, which the example Secret does not have", c.Name, e.Name, ref.Key, ref.Name)
			}
			value = v
		}
		env = append(env, e.Name+"="+value)
	}
	return env
}

// secretValue returns key of the Secret named name.
func secretValue(m *manifests, name, key string) (string, bool) {
	for _, s := range m.secrets {
		if s.Name != name {
			continue
		}
		if v, ok := s.StringData[key]; ok {
			return v, true
		}
		if v, ok := s.Data[key]; ok {
			return string(v), true
		}
	}
	return "", false
}

// checkSecretURLs checks that the example Secret holds placeholders on
// example.com hosts, never a real password.
func checkSecretURLs(t *testing.T, s corev1.Secret) {
	t.Helper()
	if len(s.Data) > 0 {
		t.Error("the example Secret has data: keep the placeholders readable in stringData")
	}
	for k, v := range s.StringData {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "postgres" {
			t.Errorf("Secret key %s: %q is no postgres URL (%v)", k, v, err)
			continue
		}
		if pw, _ := u.User.Password(); pw != "CHANGE-ME" {
			t.Errorf("Secret key %s: the password is not the placeholder CHANGE-ME", k)
		}
		if !strings.HasSuffix(u.Hostname(), ".example.com") {
			t.Errorf("Secret key %s: host %q is not an example.com host", k, u.Hostname())
		}
	}
}

// listenPort returns the port of a host:port listen address.
func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	p, err := strconv.ParseInt(addr[i+1:], 10, 32)
	if i < 0 || err != nil {
		t.Fatalf("listen address %q has no port", addr)
	}
	return int32(p)
}

// containerPort resolves a port by name or number among c's ports.
func containerPort(c corev1.Container, port intstr.IntOrString) (int32, bool) {
	for _, p := range c.Ports {
		if port.Type == intstr.String && p.Name == port.StrVal || port.Type == intstr.Int && p.ContainerPort == port.IntVal {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// checkResources checks that c requests CPU and memory and is limited in
// memory, each request at most its limit.
func checkResources(t *testing.T, what string, c corev1.Container) {
	t.Helper()
	r := c.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, ok := r.Requests[name]
		if !ok || req.IsZero() {
			t.Errorf("%s %s: no %s request", what, c.Name, name)
		}
		lim, ok := r.Limits[name]
		if !ok || lim.IsZero() {
			t.Errorf("%s %s: no %s limit", what, c.Name, name)
		} else if req.Cmp(lim) > 0 {
			t.Errorf("%s %s: %s request %s above its limit %s", what, c.Name, name, req.String(), lim.String())
		}
	}
}

// checkMemoryLimit checks that GOMEMLIMIT, when set, lies below the
// container's memory limit: the Go runtime then collects harder before
// the kernel kills the process.
func checkMemoryLimit(t *testing.T, c corev1.Container, env []string) {
	t.Helper()
	var raw string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOMEMLIMIT="); ok {
			raw = v
		}
	}
	if raw == "" {
		t.Error("GOMEMLIMIT is not set")
		return
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}}
	var bytes int64 = -1
	for _, u := range units {
		if n, ok := strings.CutSuffix(raw, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err == nil {
				bytes = v * u.mult
			}
			break
		}
	}
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if bytes <= 0 || bytes >= limit.Value() || bytes < limit.Value()*7/10 {
		t.Errorf("GOMEMLIMIT %q (%d bytes): want 70%% to 100%% of the memory limit %s", raw, bytes, limit.String())
	}
}

// TestCheckModule runs the tool module's own tests with both of its
// modfiles: every overlay, alone and with each component, decodes
// strictly into the API types of the newest Kubernetes release (go.mod)
// and of 1.27, the minimum the README states (go.127.mod), its alerts pass
// promtool, and broken manifests (a field of a later release, a misspelt
// field, an expression that does not parse) are refused.
func TestCheckModule(t *testing.T) {
	for _, modfile := range []string{"go.mod", "go.127.mod"} {
		t.Run(modfile, func(t *testing.T) {
			out := goTool(t, "test", "-count=1", "-modfile="+modfile, ".")
			t.Logf("%s", out)
		})
	}
}

// TestAlertsOfTheDocs checks that the PrometheusRule of the monitoring
// component holds every alert expression that docs/operations.md lists,
// and that its ServiceMonitor scrapes the metrics Service.
func TestAlertsOfTheDocs(t *testing.T) {
	documented := documentedAlerts(t)
	mon := renderMonitoring(t)
	for _, want := range documented {
		if !slices.ContainsFunc(mon.exprs, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("docs/operations.md lists the alert %q, which the PrometheusRule does not have", want)
		}
	}
	sm := one(t, "service monitors", mon.monitors)
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	var scraped []string
	for _, s := range mon.services {
		if !sel.Matches(labels.Set(s.Labels)) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if slices.ContainsFunc(sm.Spec.Endpoints, func(e monitorEndpoint) bool { return e.Port == p.Name }) {
				scraped = append(scraped, s.Name+"/"+p.Name)
			}
		}
	}
	if !slices.Equal(scraped, []string{"bothy-metrics/metrics"}) {
		t.Errorf("the ServiceMonitor scrapes %v, want bothy-metrics/metrics only", scraped)
	}
}

// documentedAlerts returns the alert expressions (code spans with a
// comparison) of the section "Alerts worth setting" of docs/operations.md,
// their spaces normalised; fewer than ten fail the test.
func documentedAlerts(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "Alerts worth setting")
	if !ok {
		t.Fatal(`docs/operations.md has no "Alerts worth setting"`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	var documented []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(section, -1) {
		if strings.Contains(m[1], " > ") || strings.Contains(m[1], " == ") {
			documented = append(documented, strings.Join(strings.Fields(m[1]), " "))
		}
	}
	if len(documented) < 10 {
		t.Fatalf("only %d alert expressions found in docs/operations.md: %q", len(documented), documented)
	}
	return documented
}

// monitorEndpoint is an endpoint of a ServiceMonitor: the Service port it
// scrapes.
type monitorEndpoint struct {
	Port string `json:"port"`
}

// serviceMonitor is what TestAlertsOfTheDocs reads of a ServiceMonitor of
// the Prometheus operator, whose API types this module does not import.
type serviceMonitor struct {
	Spec struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []monitorEndpoint    `json:"endpoints"`
	} `json:"spec"`
}

// monitoring is what TestAlertsOfTheDocs reads of the prod overlay with
// the component monitoring: the PrometheusRule's expressions (spaces
// normalised), the ServiceMonitors and the Services.
type monitoring struct {
	exprs    []string
	monitors []serviceMonitor
	services []corev1.Service
}

// renderMonitoring renders the prod overlay with the component monitoring
// and returns what TestAlertsOfTheDocs reads of it.
func renderMonitoring(t *testing.T) monitoring {
	t.Helper()
	var mon monitoring
	for _, d := range documentSeparator.Split(string(render(t, "overlays/prod", "components/monitoring")), -1) {
		if isEmptyDocument(d) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(d), &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "PrometheusRule":
			mon.exprs = append(mon.exprs, ruleExprs(t, d)...)
		case "ServiceMonitor":
			var sm serviceMonitor
			if err := yaml.Unmarshal([]byte(d), &sm); err != nil {
				t.Fatal(err)
			}
			mon.monitors = append(mon.monitors, sm)
		case "Service":
			var s corev1.Service
			if err := yaml.Unmarshal([]byte(d), &s); err != nil {
				t.Fatal(err)
			}
			mon.services = append(mon.services, s)
		}
	}
	return mon
}

// ruleExprs returns the expressions of the rules of the PrometheusRule
// document d, their spaces normalised.
func ruleExprs(t *testing.T, d string) []string {
	t.Helper()
	var pr struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Expr string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(d), &pr); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, strings.Join(strings.Fields(r.Expr), " "))
		}
	}
	return exprs
}

// TestEveryFileInAKustomization checks that each YAML file beside a
// kustomization is one of its resources: kustomize ignores the others in
// silence, and an object written there would never be applied.
func TestEveryFileInAKustomization(t *testing.T) {
	ks, err := filepath.Glob("*/*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Glob("*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ks = append(ks, base...)
	if len(ks) < 6 {
		t.Fatalf("kustomizations %v: want the base, two overlays and three components", ks)
	}
	for _, k := range ks {
		data, err := os.ReadFile(k)
		if err != nil {
			t.Fatal(err)
		}
		var kust struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(data, &kust); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		files, err := filepath.Glob(filepath.Join(filepath.Dir(k), "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(kust.Resources, name) {
				t.Errorf("%s is not among the resources of %s", f, k)
			}
		}
	}
}

// TestNetworkPolicyCheckFindsFaults feeds the NetworkPolicy check broken
// copies of the prod overlay's policy: each must be reported, so that
// TestManifests passing means the metrics port is closed to all but
// Prometheus.
func TestNetworkPolicyCheckFindsFaults(t *testing.T) {
	m := load(t, "overlays/prod")
	np := one(t, "network policies", m.policies)
	dep := one(t, "deployments", m.deployments)
	c := one(t, "containers", dep.Spec.Template.Spec.Containers)
	job := one(t, "jobs", m.jobs)
	podLabels, jobLabels := labels.Set(dep.Spec.Template.Labels), labels.Set(job.Spec.Template.Labels)
	pooled, _ := secretValue(m, "bothy-database", "database-url")
	direct, _ := secretValue(m, "bothy-database", "direct-url")
	problems := func(p *networkingv1.NetworkPolicy) []string {
		return networkPolicyProblems(*p, c, podLabels, jobLabels, 8080, 9090, pooled, direct)
	}
	if got := problems(&np); len(got) > 0 {
		t.Fatalf("the real policy: %v", got)
	}
	tcp := corev1.ProtocolTCP
	metrics := intstr.FromInt32(9090)
	for _, f := range []struct {
		name    string
		breakIt func(p *networkingv1.NetworkPolicy)
		want    string
	}{
		{"metrics from every pod", func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[1].From = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
		}, "port 9090 open"},
		{"a rule for every port from everyone", func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		}, "port 9090 open to everyone"},
		{"metrics from an address block", func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &metrics}},
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}},
			})
		}, "port 9090 open"},
		{"API only from Prometheus", func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress = p.Spec.Ingress[1:]
		}, "no ingress rule opens port 8080"},
		{"no egress to PgBouncer", func(p *networkingv1.NetworkPolicy) {
			for i, r := range p.Spec.Egress {
				p.Spec.Egress[i].Ports = slices.DeleteFunc(r.Ports, func(pp networkingv1.NetworkPolicyPort) bool { return pp.Port.IntValue() == 6432 })
			}
		}, "no egress to port 6432"},
		{"the Job left out", func(p *networkingv1.NetworkPolicy) {
			p.Spec.PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/component": "server"}
		}, "the Job's pod"},
	} {
		broken := np.DeepCopy()
		f.breakIt(broken)
		got := problems(broken)
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, f.want) }) {
			t.Errorf("%s: want a problem with %q, got %q", f.name, f.want, got)
		}
	}
}

// TestComponents checks what the ingress and autoscaling components
// promise once added to the prod overlay: the Ingress routes to the API
// port of the Service bothy, and the autoscaler drives the Deployment
// bothy, which then sets no replicas of its own, never below two replicas
// so that the disruption budget can still evict one.
func TestComponents(t *testing.T) {
	checkIngressComponent(t)
	checkAutoscalingComponent(t)
}

// componentObject is one object of a rendered overlay: its kind and its
// YAML document.
type componentObject struct {
	metav1.TypeMeta
	doc []byte
}

// componentObjects renders the prod overlay with components and returns
// its objects.
func componentObjects(t *testing.T, components ...string) []componentObject {
	t.Helper()
	var out []componentObject
	for _, d := range documentSeparator.Split(string(render(t, "overlays/prod", components...)), -1) {
		if isEmptyDocument(d) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(d), &tm); err != nil {
			t.Fatal(err)
		}
		out = append(out, componentObject{tm, []byte(d)})
	}
	return out
}

// decodeObject decodes o strictly into into.
func decodeObject(t *testing.T, o componentObject, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.doc, into); err != nil {
		t.Fatalf("%s: %v", o.Kind, err)
	}
}

// checkIngressComponent checks that the Ingress of the component ingress
// routes every path to the API port of the Service bothy.
func checkIngressComponent(t *testing.T) {
	t.Helper()
	var ingresses []networkingv1.Ingress
	var services []corev1.Service
	for _, o := range componentObjects(t, "components/ingress") {
		switch o.Kind {
		case "Ingress":
			var ing networkingv1.Ingress
			decodeObject(t, o, &ing)
			ingresses = append(ingresses, ing)
		case "Service":
			var s corev1.Service
			decodeObject(t, o, &s)
			services = append(services, s)
		}
	}
	ing := one(t, "ingresses", ingresses)
	backends := 0
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			backends++
			svc := p.Backend.Service
			if svc == nil || svc.Name != "bothy" || svc.Port.Name != "http" {
				t.Errorf("Ingress path %s goes to %+v, want the Service bothy, port http", p.Path, svc)
				continue
			}
			if !slices.ContainsFunc(services, func(s corev1.Service) bool {
				return s.Name == svc.Name && slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == svc.Port.Name })
			}) {
				t.Errorf("Ingress path %s: no Service %s with a port %s", p.Path, svc.Name, svc.Port.Name)
			}
		}
	}
	if backends == 0 {
		t.Error("the Ingress routes nothing")
	}
}

// checkAutoscalingComponent checks that the autoscaler of the component
// autoscaling drives the Deployment, which then sets no replicas, and
// keeps a replica the disruption budget lets a drain evict.
func checkAutoscalingComponent(t *testing.T) {
	t.Helper()
	var hpas []autoscalingv2.HorizontalPodAutoscaler
	var deployments []appsv1.Deployment
	var pdbs []policyv1.PodDisruptionBudget
	for _, o := range componentObjects(t, "components/autoscaling") {
		switch o.Kind {
		case "HorizontalPodAutoscaler":
			var h autoscalingv2.HorizontalPodAutoscaler
			decodeObject(t, o, &h)
			hpas = append(hpas, h)
		case "Deployment":
			var d appsv1.Deployment
			decodeObject(t, o, &d)
			deployments = append(deployments, d)
		case "PodDisruptionBudget":
			var p policyv1.PodDisruptionBudget
			decodeObject(t, o, &p)
			pdbs = append(pdbs, p)
		}
	}
	hpa := one(t, "autoscalers", hpas)
	dep := one(t, "deployments", deployments)
	pdb := one(t, "disruption budgets", pdbs)
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != dep.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("the autoscaler scales %+v, not the Deployment %s", ref, dep.Name)
	}
	if dep.Spec.Replicas != nil {
		t.Errorf("with the autoscaler the Deployment still sets replicas %d: every apply would undo the autoscaler", *dep.Spec.Replicas)
	}
	if least := hpa.Spec.MinReplicas; least == nil || pdb.Spec.MinAvailable == nil || *least <= pdb.Spec.MinAvailable.IntVal {
		t.Errorf("the autoscaler's minReplicas %s leaves no replica the budget (minAvailable %v) lets a drain evict", show(least), pdb.Spec.MinAvailable)
	}
}
