// Command check renders the kustomize overlays of deploy/kubernetes, alone
// and with each component, and validates them offline: every object is
// decoded strictly into the Kubernetes API types of the release the tool
// is built with, and the PrometheusRule's groups pass promtool check
// rules and promtool test rules with testdata/alerts.test.yaml. It is a
// module of its own so that kustomize, two releases of the Kubernetes API
// types and the Prometheus operator's types stay out of the server's
// module. Build it twice, once per supported end of the range:
//
//	GOWORK=off go run .                        # the newest Kubernetes release (go.mod)
//	GOWORK=off go run -modfile=go.127.mod .    # Kubernetes 1.27, the minimum (go.127.mod)
//	GOWORK=off go run . render overlays/prod [components/monitoring ...]
//
// render prints the objects of one variant as YAML, after the same
// validation; the server module's test (deploy/kubernetes) reads them.
package main

import (
	"flag"
	"fmt"
	"os"
)

// main validates every variant, or renders one, as the usage says.
func main() {
	root := flag.String("root", "..", "the manifests' folder (deploy/kubernetes)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: check [-root DIR]                         validate every overlay, alone and with each component")
		fmt.Fprintln(os.Stderr, "       check [-root DIR] render OVERLAY [COMPONENT...]   print one variant's objects as YAML")
		flag.PrintDefaults()
	}
	flag.Parse()
	tree, err := LoadTree(*root)
	if err != nil {
		fail(err)
	}
	tmp, err := os.MkdirTemp("", "bothy-manifests-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)

	args := flag.Args()
	switch {
	case len(args) == 0:
		variants, err := tree.Variants()
		if err != nil {
			fail(err)
		}
		failed := false
		for _, v := range variants {
			summary, err := Validate(tree, v, tmp)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				failed = true
				continue
			}
			fmt.Println(summary)
		}
		if failed {
			os.Exit(1)
		}
	case args[0] == "render" && len(args) >= 2:
		v := Variant{Overlay: args[1], Components: args[2:]}
		if _, err := Validate(tree, v, tmp); err != nil {
			fail(err)
		}
		rm, err := tree.Render(v)
		if err != nil {
			fail(err)
		}
		out, err := rm.AsYaml()
		if err != nil {
			fail(err)
		}
		os.Stdout.Write(out)
	default:
		flag.Usage()
		os.Exit(2)
	}
}

// Validate renders v, decodes it strictly, checks that a volume serves
// one replica (CheckVolumes) and checks its rules with promtool, and returns a line that says what was checked.
func Validate(tree *Tree, v Variant, tmp string) (string, error) {
	rm, err := tree.Render(v)
	if err != nil {
		return "", err
	}
	d, err := Decode(rm)
	if err != nil {
		return "", fmt.Errorf("%s: %w", v, err)
	}
	if err := CheckVolumes(d.Objects); err != nil {
		return "", fmt.Errorf("%s: %w", v, err)
	}
	rules := 0
	for _, pr := range d.Rules {
		for _, g := range pr.Spec.Groups {
			rules += len(g.Rules)
		}
	}
	if err := CheckRules(d.Rules, tmp); err != nil {
		return "", fmt.Errorf("%s: %w", v, err)
	}
	summary := fmt.Sprintf("%s: %d objects valid for k8s.io/api %s", v, len(d.Objects), moduleVersion("k8s.io/api"))
	if rules > 0 {
		summary += fmt.Sprintf(", %d rules pass promtool check rules and the alerts' unit tests", rules)
	}
	return summary, nil
}

// fail prints err and exits with status 1.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "check:", err)
	os.Exit(1)
}
