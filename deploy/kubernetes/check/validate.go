package main

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/yaml"
)

// kinds maps apiVersion and kind to a new value of the Go type that
// Kubernetes (or the Prometheus operator) decodes that object into. The
// types come from the k8s.io/api of the modfile the tool is built with:
// go.mod holds the newest release, go.127.mod the oldest one the README
// supports, so the same code checks both.
var kinds = map[string]func() any{
	"v1 Namespace":                            func() any { return &corev1.Namespace{} },
	"v1 ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1 Secret":                               func() any { return &corev1.Secret{} },
	"v1 PersistentVolumeClaim":                func() any { return &corev1.PersistentVolumeClaim{} },
	"v1 Service":                              func() any { return &corev1.Service{} },
	"apps/v1 Deployment":                      func() any { return &appsv1.Deployment{} },
	"batch/v1 Job":                            func() any { return &batchv1.Job{} },
	"policy/v1 PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1 NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"networking.k8s.io/v1 Ingress":            func() any { return &networkingv1.Ingress{} },
	"autoscaling/v2 HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"monitoring.coreos.com/v1 ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1 PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// Decoded is a rendered variant decoded into API types.
type Decoded struct {
	// Objects are the decoded objects in the order kustomize gives them.
	Objects []any
	// Rules are the PrometheusRule objects among them.
	Rules []*monitoringv1.PrometheusRule
}

// Decode decodes every object of rm strictly: a field that the API type
// of the built-in Kubernetes version does not have (a typo, or a field of
// a later release), a value of the wrong type, a duplicate key or a kind
// the tool does not know is an error, as the API server's strict field
// validation would make it.
func Decode(rm resmap.ResMap) (*Decoded, error) {
	d := &Decoded{}
	var errs []error
	for _, r := range rm.Resources() {
		id := r.CurId().String()
		doc, err := r.AsYAML()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		newObject, ok := kinds[r.GetApiVersion()+" "+r.GetKind()]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: kind %s of apiVersion %s is not known to the check", id, r.GetKind(), r.GetApiVersion()))
			continue
		}
		o := newObject()
		if err := yaml.UnmarshalStrict(doc, o); err != nil {
			errs = append(errs, fmt.Errorf("%s: not valid for the API types of k8s.io/api %s: %w", id, moduleVersion("k8s.io/api"), err))
			continue
		}
		d.Objects = append(d.Objects, o)
		if pr, ok := o.(*monitoringv1.PrometheusRule); ok {
			d.Rules = append(d.Rules, pr)
		}
	}
	return d, errors.Join(errs...)
}

// CheckVolumes refuses a Deployment that mounts a PersistentVolumeClaim
// (the component files-volume: files.storage on a folder) unless exactly
// one replica runs it: replicas 1, no HorizontalPodAutoscaler scaling it,
// and a Recreate rollout, which never runs a second pod beside the first.
// A ReadWriteOnce volume follows one pod, and a folder serves one replica;
// more replicas need an S3-compatible store (docs/operations.md#files).
func CheckVolumes(objects []any) error {
	scaled := map[string]bool{}
	for _, o := range objects {
		if h, ok := o.(*autoscalingv2.HorizontalPodAutoscaler); ok && h.Spec.ScaleTargetRef.Kind == "Deployment" {
			scaled[h.Namespace+"/"+h.Spec.ScaleTargetRef.Name] = true
		}
	}
	var errs []error
	for _, o := range objects {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		claim := ""
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		if claim == "" {
			continue
		}
		name := d.Namespace + "/" + d.Name
		switch {
		case scaled[name]:
			errs = append(errs, fmt.Errorf("Deployment %s mounts the PersistentVolumeClaim %s and a HorizontalPodAutoscaler scales it: "+
				"a volume serves one replica; leave out the autoscaling component, or use S3 for more replicas", name, claim))
		case d.Spec.Replicas == nil || *d.Spec.Replicas != 1:
			errs = append(errs, fmt.Errorf("Deployment %s mounts the PersistentVolumeClaim %s with replicas %v: "+
				"a volume serves one replica; use S3 for more", name, claim, replicasOf(d)))
		case d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType:
			errs = append(errs, fmt.Errorf("Deployment %s mounts the PersistentVolumeClaim %s with strategy %q: "+
				"want Recreate, so that a rollout never runs a second pod on the volume", name, claim, d.Spec.Strategy.Type))
		}
	}
	return errors.Join(errs...)
}

// replicasOf shows a Deployment's replicas, "unset" when it has none.
func replicasOf(d *appsv1.Deployment) any {
	if d.Spec.Replicas == nil {
		return "unset"
	}
	return *d.Spec.Replicas
}

// RulesFile writes the rule groups of the PrometheusRules as a Prometheus
// rules file: the operator hands Prometheus exactly spec.groups.
func RulesFile(rules []*monitoringv1.PrometheusRule) ([]byte, error) {
	var all struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	for _, r := range rules {
		all.Groups = append(all.Groups, r.Spec.Groups...)
	}
	return yaml.Marshal(all)
}

// alertTests are promtool's unit tests of the alerts: series that must
// make each alert fire after its for duration, and not before.
//
//go:embed testdata/alerts.test.yaml
var alertTests []byte

// CheckRules runs promtool on the groups of the PrometheusRules: check
// rules parses every expression, checks the durations and the templates
// of labels and annotations and refuses duplicate rules; test rules then
// runs alertTests against them.
func CheckRules(rules []*monitoringv1.PrometheusRule, tmp string) error {
	if len(rules) == 0 {
		return nil
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		return fmt.Errorf("promtool is needed to check the PrometheusRule (Debian's package prometheus has it): %w", err)
	}
	data, err := RulesFile(rules)
	if err != nil {
		return err
	}
	// The unit tests name the rules file bothy-rules.yaml beside them.
	file := filepath.Join(tmp, "bothy-rules.yaml")
	tests := filepath.Join(tmp, "alerts.test.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(tests, alertTests, 0o600); err != nil {
		return err
	}
	for _, args := range [][]string{{"check", "rules", file}, {"test", "rules", tests}} {
		var out bytes.Buffer
		cmd := exec.Command(promtool, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("promtool %s %s: %w\n%s", args[0], args[1], err, out.String())
		}
	}
	return nil
}

// moduleVersion returns the version of module path in the running binary,
// which tells which Kubernetes release's types did the decoding.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return "(unknown)"
}
