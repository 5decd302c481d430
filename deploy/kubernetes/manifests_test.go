// Package kubernetes_test checks the manifests of deploy/kubernetes: each
// document decodes strictly into its typed Kubernetes object, and the
// pieces fit together (ports, probes, the join address, selectors,
// configuration keys, the eddy flags they pass). The directory holds no Go
// package besides this test.
package kubernetes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// manifests is every object of the directory, by kind.
type manifests struct {
	statefulSets []*appsv1.StatefulSet
	deployments  []*appsv1.Deployment
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	pvcs         []*corev1.PersistentVolumeClaim
	pdbs         []*policyv1.PodDisruptionBudget
	netpols      []*networkingv1.NetworkPolicy
}

// decodeStrict decodes one YAML document into v, refusing fields v's type
// does not have: a misspelt or misplaced field fails here rather than
// being dropped silently by the API server.
func decodeStrict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func load(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	m := &manifests{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			where := fmt.Sprintf("%s: %s %s", f, head.Kind, head.Metadata.Name)
			if head.Metadata.Namespace != "" {
				t.Errorf("%s: names namespace %q; the manifests are namespace-agnostic", where, head.Metadata.Namespace)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 StatefulSet":
				o := &appsv1.StatefulSet{}
				m.statefulSets, obj = append(m.statefulSets, o), o
			case "apps/v1 Deployment":
				o := &appsv1.Deployment{}
				m.deployments, obj = append(m.deployments, o), o
			case "v1 Service":
				o := &corev1.Service{}
				m.services, obj = append(m.services, o), o
			case "v1 ConfigMap":
				o := &corev1.ConfigMap{}
				m.configMaps, obj = append(m.configMaps, o), o
			case "v1 PersistentVolumeClaim":
				o := &corev1.PersistentVolumeClaim{}
				m.pvcs, obj = append(m.pvcs, o), o
			case "policy/v1 PodDisruptionBudget":
				o := &policyv1.PodDisruptionBudget{}
				m.pdbs, obj = append(m.pdbs, o), o
			case "networking.k8s.io/v1 NetworkPolicy":
				o := &networkingv1.NetworkPolicy{}
				m.netpols, obj = append(m.netpols, o), o
			default:
				t.Fatalf("%s: %s %s is not a kind this test knows", where, head.APIVersion, head.Kind)
			}
			if err := decodeStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestStrictDecodeRefusesUnknownFields: the decoder the test relies on
// does refuse a field the type lacks.
func TestStrictDecodeRefusesUnknownFields(t *testing.T) {
	doc := "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selectr: {a: b}\n"
	if err := decodeStrict([]byte(doc), &corev1.Service{}); err == nil || !strings.Contains(err.Error(), "selectr") {
		t.Fatalf("unknown field accepted: %v", err)
	}
}

func (m *manifests) statefulSet(t *testing.T, name string) *appsv1.StatefulSet {
	t.Helper()
	for _, s := range m.statefulSets {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no StatefulSet %s", name)
	return nil
}

func (m *manifests) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range m.deployments {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

func (m *manifests) service(name string) *corev1.Service {
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// pod is one pod a workload makes: its labels (with those the StatefulSet
// controller adds) and its spec.
type pod struct {
	name   string
	labels map[string]string
	spec   *corev1.PodSpec
}

func (m *manifests) pods() []pod {
	var out []pod
	for _, s := range m.statefulSets {
		for i := range int(*s.Spec.Replicas) {
			name := fmt.Sprintf("%s-%d", s.Name, i)
			labels := map[string]string{"statefulset.kubernetes.io/pod-name": name}
			for k, v := range s.Spec.Template.Labels {
				labels[k] = v
			}
			out = append(out, pod{name, labels, &s.Spec.Template.Spec})
		}
	}
	for _, d := range m.deployments {
		out = append(out, pod{d.Name + "-*", d.Spec.Template.Labels, &d.Spec.Template.Spec})
	}
	return out
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// selected is the pods a Service selects.
func (m *manifests) selected(s *corev1.Service) []pod {
	var out []pod
	for _, p := range m.pods() {
		if selects(s.Spec.Selector, p.labels) {
			out = append(out, p)
		}
	}
	return out
}

// args parses a container's --name=value arguments (after the
// subcommand); a flag without "=" is a boolean.
func args(t *testing.T, c corev1.Container) (sub string, flags map[string]string) {
	t.Helper()
	if len(c.Command) != 1 || c.Command[0] != "eddy" || len(c.Args) == 0 {
		t.Fatalf("container %s: want command [eddy] and a subcommand in args, got %v %v", c.Name, c.Command, c.Args)
	}
	flags = map[string]string{}
	for _, a := range c.Args[1:] {
		if !strings.HasPrefix(a, "--") {
			t.Fatalf("container %s: argument %q is not --flag[=value]", c.Name, a)
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			value = "true"
		}
		if _, dup := flags[name]; dup {
			t.Errorf("container %s: --%s given twice", c.Name, name)
		}
		flags[name] = value
	}
	return c.Args[0], flags
}

// port is the port number of a listen address flag, "0.0.0.0:7700".
func port(t *testing.T, addr string) int32 {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	p, err := strconv.Atoi(addr[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return int32(p)
}

func containerPort(c corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// resolve is the container port a Service targetPort or probe port names.
func resolve(spec *corev1.PodSpec, target intstr.IntOrString) (int32, bool) {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if target.Type == intstr.String && p.Name == target.StrVal || target.Type == intstr.Int && p.ContainerPort == target.IntVal {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// listenFlags maps the flags that name a listen address to the container
// port name that must carry the same port.
var listenFlags = map[string]string{"api": "api", "raft": "raft", "http": "http", "metrics": "metrics", "data": "data"}

// checkContainer checks what every eddy container needs: the ports of its
// listen flags declared under their names, probes on the metrics port,
// the scrape annotations, resources, and every $(VAR) defined.
func checkContainer(t *testing.T, m *manifests, annotations map[string]string, c corev1.Container) map[string]string {
	t.Helper()
	_, flags := args(t, c)
	for flag, portName := range listenFlags {
		addr, ok := flags[flag]
		if !ok {
			continue
		}
		got, ok := containerPort(c, portName)
		if !ok || got != port(t, addr) {
			t.Errorf("container %s: --%s=%s but port %q is %d (declared: %v)", c.Name, flag, addr, portName, got, ok)
		}
	}
	metrics, ok := containerPort(c, "metrics")
	if !ok || flags["metrics"] == "" {
		t.Fatalf("container %s: no metrics port or --metrics", c.Name)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("container %s: no HTTP %s probe", c.Name, p.what)
			continue
		}
		got, ok := resolve(&corev1.PodSpec{Containers: []corev1.Container{c}}, p.probe.HTTPGet.Port)
		if !ok || got != metrics || p.probe.HTTPGet.Path != p.path {
			t.Errorf("container %s: %s probe on %s%s, want the metrics port %d%s", c.Name, p.what, p.probe.HTTPGet.Port.String(), p.probe.HTTPGet.Path, metrics, p.path)
		}
	}
	if annotations["prometheus.io/scrape"] != "true" || annotations["prometheus.io/path"] != "/metrics" ||
		annotations["prometheus.io/port"] != strconv.Itoa(int(metrics)) {
		t.Errorf("container %s: scrape annotations %v, want scrape true, port %d, path /metrics", c.Name, annotations, metrics)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("container %s: %s request %s, limit %s: want both, request ≤ limit", c.Name, r, req.String(), lim.String())
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for _, a := range c.Args {
		for _, ref := range regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`).FindAllStringSubmatch(a, -1) {
			if _, ok := env[ref[1]]; !ok {
				t.Errorf("container %s: %q uses $(%s), which its env does not define (Kubernetes would pass it verbatim)", c.Name, a, ref[1])
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
			if !m.configMapHas(ref.Name, ref.Key) {
				t.Errorf("container %s: env %s from ConfigMap %s key %q, which it lacks", c.Name, e.Name, ref.Name, ref.Key)
			}
		}
		if ref := e.ValueFrom.SecretKeyRef; ref != nil && (ref.Name != secretName || !slices.Contains(secretKeys, ref.Key)) {
			t.Errorf("container %s: env %s from Secret %s key %q: README.md creates %s with keys %v", c.Name, e.Name, ref.Name, ref.Key, secretName, secretKeys)
		}
	}
	return flags
}

// secretName and secretKeys are the Secret README.md tells to create.
const secretName = "eddy-secrets"

var secretKeys = []string{"admin-token", "s3-access-key", "s3-secret-key"}

func (m *manifests) configMapHas(name, key string) bool {
	for _, c := range m.configMaps {
		if c.Name == name {
			_, ok := c.Data[key]
			return ok
		}
	}
	return false
}

func TestManifests(t *testing.T) {
	m := load(t)
	sts := m.statefulSet(t, "eddy-coordinator")
	workers := m.deployment(t, "eddy-worker")

	t.Run("coordinators", func(t *testing.T) {
		if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
			t.Fatalf("replicas %d, want 3", ptrOr(sts.Spec.Replicas))
		}
		if !selects(sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels) {
			t.Errorf("the StatefulSet's selector %v does not select its pods %v", sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels)
		}
		c := sts.Spec.Template.Spec.Containers[0]
		sub, flags := args(t, c)
		if sub != "coordinator" {
			t.Fatalf("subcommand %q", sub)
		}
		checkContainer(t, m, sts.Spec.Template.Annotations, c)

		// The headless Service of --statefulset-service exists, is the
		// StatefulSet's, selects its pods and publishes them before they
		// are ready (a member is ready only once in the group).
		headless := m.service(flags["statefulset-service"])
		if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
			t.Fatalf("--statefulset-service=%s: want a headless Service publishing not-ready addresses, got %+v", flags["statefulset-service"], headless)
		}
		if sts.Spec.ServiceName != headless.Name {
			t.Errorf("serviceName %q, want the headless Service %q: pod DNS names come from it", sts.Spec.ServiceName, headless.Name)
		}
		// The join address eddy derives for ordinal N > 0 is
		// SET-0.SERVICE:API-PORT: a pod the headless Service selects,
		// on a port it serves.
		apiPort := port(t, flags["api"])
		join := fmt.Sprintf("%s-0.%s:%d", sts.Name, headless.Name, apiPort)
		found := false
		for _, p := range m.selected(headless) {
			found = found || p.name == sts.Name+"-0"
		}
		if !found {
			t.Errorf("join address %s: the headless Service selects no pod %s-0", join, sts.Name)
		}
		if !servesPort(headless, apiPort) {
			t.Errorf("join address %s: the headless Service has no port %d", join, apiPort)
		}
		for _, f := range []string{"id", "bootstrap", "join", "advertise"} {
			if _, ok := flags[f]; ok {
				t.Errorf("--%s is derived by --statefulset-service; given too", f)
			}
		}

		// --raft-advertise=$(POD_NAME):PORT: each member's own Service,
		// on the Raft port, published before the pod is ready.
		adv := flags["raft-advertise"]
		if adv != fmt.Sprintf("$(POD_NAME):%d", port(t, flags["raft"])) || !envFromField(c, "POD_NAME", "metadata.name") {
			t.Fatalf("--raft-advertise=%s: want $(POD_NAME):<the --raft port> with POD_NAME from metadata.name", adv)
		}
		for i := range int(*sts.Spec.Replicas) {
			name := fmt.Sprintf("%s-%d", sts.Name, i)
			s := m.service(name)
			if s == nil || !s.Spec.PublishNotReadyAddresses || s.Spec.ClusterIP == corev1.ClusterIPNone || !servesPort(s, port(t, flags["raft"])) {
				t.Errorf("member %s: want a Service %s with a cluster IP on the Raft port, published before ready; got %+v", name, name, s)
				continue
			}
			if sel := m.selected(s); len(sel) != 1 || sel[0].name != name {
				t.Errorf("Service %s selects %v, want pod %s alone", name, sel, name)
			}
		}

		// The data directory is a volume of each member.
		mounted := false
		for _, vm := range c.VolumeMounts {
			for _, vct := range sts.Spec.VolumeClaimTemplates {
				mounted = mounted || vm.Name == vct.Name && vm.MountPath == flags["data-dir"]
			}
		}
		if !mounted {
			t.Errorf("--data-dir=%s is not a volumeClaimTemplate's mount", flags["data-dir"])
		}
		// The module store is one volume every member mounts.
		blobs := ""
		for _, vm := range c.VolumeMounts {
			if vm.MountPath == flags["blobs"] {
				blobs = vm.Name
			}
		}
		claim := ""
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == blobs && v.PersistentVolumeClaim != nil {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		shared := false
		for _, p := range m.pvcs {
			shared = shared || p.Name == claim && slices.Contains(p.Spec.AccessModes, corev1.ReadWriteMany)
		}
		if !shared {
			t.Errorf("--blobs=%s: want the mount of a ReadWriteMany claim (volume %q, claim %q)", flags["blobs"], blobs, claim)
		}

		// Checkpoints go to the s3:// URL of the ConfigMap, with the
		// keys from the Secret.
		if flags["checkpoints"] != "$(EDDY_CHECKPOINTS)" {
			t.Fatalf("--checkpoints=%s, want $(EDDY_CHECKPOINTS)", flags["checkpoints"])
		}
		checkS3(t, m, c, true)
		for _, e := range []string{"EDDY_BOOTSTRAP_TOKEN", "EDDY_TOKEN"} {
			if !envFromSecret(c, e, "admin-token") {
				t.Errorf("%s is not the Secret's admin-token", e)
			}
		}
	})

	t.Run("workers", func(t *testing.T) {
		if !selects(workers.Spec.Selector.MatchLabels, workers.Spec.Template.Labels) {
			t.Errorf("the Deployment's selector does not select its pods")
		}
		c := workers.Spec.Template.Spec.Containers[0]
		sub, flags := args(t, c)
		if sub != "worker" {
			t.Fatalf("subcommand %q", sub)
		}
		checkContainer(t, m, workers.Spec.Template.Annotations, c)
		// --coordinator names the client Service of the coordinators.
		host, p, ok := strings.Cut(flags["coordinator"], ":")
		s := m.service(host)
		n, _ := strconv.Atoi(p)
		if !ok || s == nil || !servesPort(s, int32(n)) {
			t.Fatalf("--coordinator=%s: no Service %s on port %s", flags["coordinator"], host, p)
		}
		sel := m.selected(s)
		if len(sel) != int(*sts.Spec.Replicas) || !strings.HasPrefix(sel[0].name, sts.Name+"-") {
			t.Errorf("--coordinator=%s: the Service selects %d pods, want the %d coordinators", flags["coordinator"], len(sel), *sts.Spec.Replicas)
		}
		if target, _ := m.targetOf(s, int32(n)); target != port(t, argValue(sts.Spec.Template.Spec.Containers[0], "api")) {
			t.Errorf("--coordinator=%s reaches container port %d, not the coordinators' --api", flags["coordinator"], target)
		}
		if flags["advertise"] != fmt.Sprintf("$(POD_IP):%d", port(t, flags["data"])) || !envFromField(c, "POD_IP", "status.podIP") {
			t.Errorf("--advertise=%s: want $(POD_IP):<the --data port> with POD_IP from status.podIP", flags["advertise"])
		}
		checkS3(t, m, c, false)
	})

	t.Run("services", func(t *testing.T) {
		for _, s := range m.services {
			pods := m.selected(s)
			if len(pods) == 0 {
				t.Errorf("Service %s selects no pod (selector %v)", s.Name, s.Spec.Selector)
				continue
			}
			for _, sp := range s.Spec.Ports {
				target := sp.TargetPort
				if target.Type == intstr.Int && target.IntVal == 0 {
					target = intstr.FromInt32(sp.Port)
				}
				for _, p := range pods {
					if _, ok := resolve(p.spec, target); !ok {
						t.Errorf("Service %s port %s: targetPort %s is not a port of pod %s", s.Name, sp.Name, target.String(), p.name)
					}
				}
			}
		}
		for _, want := range []string{"eddy-coordinator", "eddy-dashboard"} {
			if m.service(want) == nil {
				t.Errorf("no Service %s", want)
			}
		}
		if s := m.service("eddy-dashboard"); s != nil {
			if target, ok := m.targetOf(s, s.Spec.Ports[0].Port); !ok || target != port(t, argValue(sts.Spec.Template.Spec.Containers[0], "http")) {
				t.Errorf("the dashboard Service does not reach the coordinators' --http port")
			}
		}
	})

	t.Run("disruption budget", func(t *testing.T) {
		if len(m.pdbs) != 1 {
			t.Fatalf("%d PodDisruptionBudgets, want 1", len(m.pdbs))
		}
		pdb := m.pdbs[0]
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil {
			t.Errorf("maxUnavailable %v, minAvailable %v: want maxUnavailable 1 alone (a quorum of 3)", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
		}
		var sel []string
		for _, p := range m.pods() {
			if selects(pdb.Spec.Selector.MatchLabels, p.labels) {
				sel = append(sel, p.name)
			}
		}
		want := []string{"eddy-coordinator-0", "eddy-coordinator-1", "eddy-coordinator-2"}
		if !slices.Equal(sel, want) {
			t.Errorf("the budget selects %v, want the coordinators %v", sel, want)
		}
	})

	t.Run("network policy", func(t *testing.T) {
		if len(m.netpols) != 1 {
			t.Fatalf("%d NetworkPolicies", len(m.netpols))
		}
		np := m.netpols[0]
		for _, p := range m.pods() {
			if !selects(np.Spec.PodSelector.MatchLabels, p.labels) {
				t.Errorf("the NetworkPolicy does not cover pod %s", p.name)
			}
		}
		// Raft and the data exchange are reachable from members only: no
		// rule opens them to other pods.
		for _, rule := range np.Spec.Ingress {
			fromMembers := len(rule.From) == 1 && rule.From[0].PodSelector != nil && selects(rule.From[0].PodSelector.MatchLabels, m.pods()[0].labels) && selects(rule.From[0].PodSelector.MatchLabels, m.pods()[len(m.pods())-1].labels)
			if fromMembers {
				continue
			}
			if len(rule.Ports) == 0 {
				t.Errorf("rule %+v opens every port to non-members", rule)
			}
			for _, p := range rule.Ports {
				if p.Port != nil && (p.Port.IntValue() == 7701 || p.Port.IntValue() == 7800) {
					t.Errorf("rule %+v opens a member port to non-members", rule)
				}
			}
		}
	})

	t.Run("eddy flags", func(t *testing.T) {
		bin := buildEddy(t)
		for _, c := range []corev1.Container{sts.Spec.Template.Spec.Containers[0], workers.Spec.Template.Spec.Containers[0]} {
			sub, flags := args(t, c)
			known := eddyFlags(t, bin, sub)
			for f := range flags {
				if !known[f] {
					t.Errorf("container %s: eddy %s has no flag --%s", c.Name, sub, f)
				}
			}
		}
	})
}

func servesPort(s *corev1.Service, p int32) bool {
	for _, sp := range s.Spec.Ports {
		if sp.Port == p {
			return true
		}
	}
	return false
}

// targetOf is the container port a Service's port p reaches, the same on
// every pod it selects.
func (m *manifests) targetOf(s *corev1.Service, p int32) (int32, bool) {
	for _, sp := range s.Spec.Ports {
		if sp.Port != p {
			continue
		}
		target := sp.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(sp.Port)
		}
		var got int32
		for i, pod := range m.selected(s) {
			cp, ok := resolve(pod.spec, target)
			if !ok || i > 0 && cp != got {
				return 0, false
			}
			got = cp
		}
		return got, got != 0
	}
	return 0, false
}

func argValue(c corev1.Container, flag string) string {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return v
		}
	}
	return ""
}

func envFromField(c corev1.Container, name, field string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field {
			return true
		}
	}
	return false
}

func envFromSecret(c corev1.Container, name, key string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secretName && e.ValueFrom.SecretKeyRef.Key == key {
			return true
		}
	}
	return false
}

// checkS3: the container has the S3 credentials from the Secret and, for
// a coordinator, the checkpoint URL from the ConfigMap, an s3:// one.
func checkS3(t *testing.T, m *manifests, c corev1.Container, coordinator bool) {
	t.Helper()
	for _, e := range []struct{ env, key string }{{"EDDY_S3_ACCESS_KEY", "s3-access-key"}, {"EDDY_S3_SECRET_KEY", "s3-secret-key"}} {
		if !envFromSecret(c, e.env, e.key) {
			t.Errorf("container %s: %s is not the Secret's %s", c.Name, e.env, e.key)
		}
	}
	if !coordinator {
		return
	}
	for _, e := range c.Env {
		if e.Name == "EDDY_CHECKPOINTS" && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			ref := e.ValueFrom.ConfigMapKeyRef
			for _, cm := range m.configMaps {
				if cm.Name == ref.Name && strings.HasPrefix(cm.Data[ref.Key], "s3://") {
					return
				}
			}
		}
	}
	t.Errorf("container %s: EDDY_CHECKPOINTS is not an s3:// URL from the ConfigMap", c.Name)
}

// buildEddy builds the eddy binary into the test's directory.
func buildEddy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "eddy")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/eddy-stream/eddy/cmd/eddy").CombinedOutput()
	if err != nil {
		t.Fatalf("build eddy: %v\n%s", err, out)
	}
	return bin
}

// eddyFlags are the flags `eddy SUB -h` lists: the binary's own flag
// registration, not a copy of it.
func eddyFlags(t *testing.T, bin, sub string) map[string]bool {
	t.Helper()
	cmd := exec.Command(bin, sub, "-h")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("eddy %s -h: %v\n%s", sub, err, out.String())
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 5 {
		t.Fatalf("eddy %s -h lists %d flags:\n%s", sub, len(flags), out.String())
	}
	return flags
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
