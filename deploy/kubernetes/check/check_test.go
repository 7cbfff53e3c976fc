package main

import (
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
)

// loadTree copies the real manifests into memory for one test.
func loadTree(t *testing.T) *Tree {
	t.Helper()
	tree, err := LoadTree("..")
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// edit replaces old by new in the file rel of tree, failing the test when
// old is not there (the fault would not be injected and the test would
// prove nothing).
func edit(t *testing.T, tree *Tree, rel, old, new string) {
	t.Helper()
	data, err := tree.ReadFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q to replace", rel, old)
	}
	if err := tree.WriteFile(rel, []byte(strings.Replace(string(data), old, new, 1))); err != nil {
		t.Fatal(err)
	}
}

// TestEveryVariantValidates renders every overlay, alone and with each
// component, and validates it with the API types this build has.
func TestEveryVariantValidates(t *testing.T) {
	tree := loadTree(t)
	variants, err := tree.Variants()
	if err != nil {
		t.Fatal(err)
	}
	var overlays, withMonitoring int
	for _, v := range variants {
		summary, err := Validate(tree, v, t.TempDir())
		if err != nil {
			t.Error(err)
			continue
		}
		t.Log(summary)
		if len(v.Components) == 0 {
			overlays++
		}
		if strings.Contains(v.String(), "components/monitoring") {
			withMonitoring++
			if !strings.Contains(summary, "rules pass promtool") {
				t.Errorf("%s: no alerting rule checked", v)
			}
		}
	}
	if overlays < 2 || withMonitoring != overlays {
		t.Errorf("%d overlays, %d with the monitoring component: want dev and prod, each with it", overlays, withMonitoring)
	}
}

// TestFieldOfALaterRelease adds spec.podReplacementPolicy (Kubernetes
// 1.28) to the migration Job: the build of go.mod (the newest release)
// accepts it, the build of go.127.mod (the minimum) must refuse it.
func TestFieldOfALaterRelease(t *testing.T) {
	tree := loadTree(t)
	edit(t, tree, "base/20-migrate-job.yaml", "  backoffLimit: 3\n", "  backoffLimit: 3\n  podReplacementPolicy: Failed\n")
	_, known := reflect.TypeOf(batchv1.JobSpec{}).FieldByName("PodReplacementPolicy")
	api := moduleVersion("k8s.io/api")
	if strings.HasPrefix(api, "v0.27.") && known {
		t.Fatalf("k8s.io/api %s has JobSpec.PodReplacementPolicy: the fault proves nothing", api)
	}
	_, err := Validate(tree, Variant{Overlay: "overlays/prod"}, t.TempDir())
	switch {
	case known && err != nil:
		t.Errorf("k8s.io/api %s knows podReplacementPolicy, yet: %v", api, err)
	case !known && (err == nil || !strings.Contains(err.Error(), "podReplacementPolicy")):
		t.Errorf("k8s.io/api %s has no podReplacementPolicy, yet the Job validated: %v", api, err)
	}
	t.Logf("k8s.io/api %s, field known %v: %v", api, known, err)
}

// TestFaultsFound breaks the manifests in ways each release refuses, and
// renders a combination of components that no installation may use (the
// files volume under the autoscaler).
func TestFaultsFound(t *testing.T) {
	for _, c := range []struct {
		name, file, old, new string
		variant              Variant
		want                 string
	}{{
		name: "misspelt field", file: "base/30-deployment.yaml",
		old: "  replicas: 2\n", new: "  replica: 2\n",
		variant: Variant{Overlay: "overlays/prod"}, want: `unknown field "replica"`,
	}, {
		name: "value of the wrong type", file: "base/50-poddisruptionbudget.yaml",
		old: "unhealthyPodEvictionPolicy: AlwaysAllow", new: "unhealthyPodEvictionPolicy: [AlwaysAllow]",
		variant: Variant{Overlay: "overlays/dev"}, want: "PodDisruptionBudget",
	}, {
		name: "unknown kind", file: "base/60-networkpolicy.yaml",
		old: "kind: NetworkPolicy", new: "kind: NetworkPolicies",
		variant: Variant{Overlay: "overlays/prod"}, want: "not known to the check",
	}, {
		name: "field misspelt in a component", file: "components/monitoring/servicemonitor.yaml",
		old: "      interval: 30s\n", new: "      intervall: 30s\n",
		variant: Variant{Overlay: "overlays/prod", Components: []string{"components/monitoring"}}, want: "intervall",
	}, {
		name: "expression that does not parse", file: "components/monitoring/prometheusrule.yaml",
		old:     `expr: sum(rate(bothy_operations_total{code="internal_error"}[5m])) > 0`,
		new:     `expr: sum(rate(bothy_operations_total{code="internal_error"}[5m]) > 0`,
		variant: Variant{Overlay: "overlays/prod", Components: []string{"components/monitoring"}}, want: "promtool check rules",
	}, {
		name: "annotation template that does not parse", file: "components/monitoring/prometheusrule.yaml",
		old:     `description: "{{ $value }} runs are queued."`,
		new:     `description: "{{ $value runs are queued."`,
		variant: Variant{Overlay: "overlays/dev", Components: []string{"components/monitoring"}}, want: "promtool check rules",
	}, {
		name: "alert that waits too long", file: "components/monitoring/prometheusrule.yaml",
		old:     "          expr: up{job=\"bothy\"} == 0\n          for: 2m\n",
		new:     "          expr: up{job=\"bothy\"} == 0\n          for: 20m\n",
		variant: Variant{Overlay: "overlays/prod", Components: []string{"components/monitoring"}}, want: "promtool test rules",
	}, {
		name: "kustomization naming a missing file", file: "base/kustomization.yaml",
		old: "  - 60-networkpolicy.yaml\n", new: "  - 60-networkpolicy.yaml\n  - 70-missing.yaml\n",
		variant: Variant{Overlay: "overlays/prod"}, want: "kustomize",
	}, {
		name:    "volume under the autoscaler",
		variant: Variant{Overlay: "overlays/prod", Components: []string{"components/files-volume", "components/autoscaling"}}, want: "HorizontalPodAutoscaler scales it",
	}, {
		name:    "volume under the autoscaler, the other order",
		variant: Variant{Overlay: "overlays/dev", Components: []string{"components/autoscaling", "components/files-volume"}}, want: "HorizontalPodAutoscaler scales it",
	}, {
		name: "volume for two replicas", file: "components/files-volume/kustomization.yaml",
		old: "        value: 1\n", new: "        value: 2\n",
		variant: Variant{Overlay: "overlays/prod", Components: []string{"components/files-volume"}}, want: "with replicas 2",
	}, {
		name: "volume in a rolling update", file: "components/files-volume/kustomization.yaml",
		old: "          type: Recreate\n", new: "          type: RollingUpdate\n",
		variant: Variant{Overlay: "overlays/prod", Components: []string{"components/files-volume"}}, want: "want Recreate",
	}} {
		t.Run(c.name, func(t *testing.T) {
			tree := loadTree(t)
			// A case without a file is a combination the tree refuses as
			// it is.
			if c.file != "" {
				edit(t, tree, c.file, c.old, c.new)
			}
			_, err := Validate(tree, c.variant, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error with %q, got %v", c.want, err)
			}
			t.Log(err)
		})
	}
}
