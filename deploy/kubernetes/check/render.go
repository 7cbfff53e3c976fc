package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Variant is one installation the manifests allow: an overlay, with the
// components an operator may add to it.
type Variant struct {
	// Overlay is the overlay's folder relative to the manifests' root,
	// such as overlays/prod.
	Overlay string
	// Components are component folders relative to the root, such as
	// components/monitoring.
	Components []string
}

// String names the variant as the tool's output and errors do.
func (v Variant) String() string {
	return strings.Join(append([]string{v.Overlay}, v.Components...), " + ")
}

// Tree is the manifests' folder (deploy/kubernetes) copied into memory, so
// that a variant with components can be rendered through a kustomization
// written beside the others without touching the disk, and so that a test
// can break a file of the copy.
type Tree struct {
	fs   filesys.FileSystem
	root string
}

// rootInMemory is where the copy lives in the in-memory filesystem.
const rootInMemory = "/manifests"

// LoadTree copies every YAML file under dir (the tool's own folder left
// out) into memory.
func LoadTree(dir string) (*Tree, error) {
	t := &Tree{fs: filesys.MakeFsInMemory(), root: rootInMemory}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "check" {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return t.WriteFile(filepath.ToSlash(rel), data)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// WriteFile writes (or replaces) the file rel, relative to the root.
func (t *Tree) WriteFile(rel string, data []byte) error {
	abs := path.Join(t.root, rel)
	if err := t.fs.MkdirAll(path.Dir(abs)); err != nil {
		return err
	}
	return t.fs.WriteFile(abs, data)
}

// ReadFile reads the file rel, relative to the root.
func (t *Tree) ReadFile(rel string) ([]byte, error) {
	return t.fs.ReadFile(path.Join(t.root, rel))
}

// dirs lists the folders directly under rel that hold a kustomization.
func (t *Tree) dirs(rel string) ([]string, error) {
	var out []string
	base := path.Join(t.root, rel)
	entries, err := t.fs.ReadDir(base)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if t.fs.Exists(path.Join(base, e, "kustomization.yaml")) {
			out = append(out, path.Join(rel, e))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Variants lists every overlay alone and with each component: the
// installations the README describes. Each component is rendered on its
// own; the one combination refused (files-volume with autoscaling) is
// CheckVolumes's, tested by TestFaultsFound.
func (t *Tree) Variants() ([]Variant, error) {
	overlays, err := t.dirs("overlays")
	if err != nil {
		return nil, err
	}
	components, err := t.dirs("components")
	if err != nil {
		return nil, err
	}
	if len(overlays) == 0 {
		return nil, fmt.Errorf("no overlay under %s/overlays", t.root)
	}
	var out []Variant
	for _, o := range overlays {
		out = append(out, Variant{Overlay: o})
		for _, c := range components {
			out = append(out, Variant{Overlay: o, Components: []string{c}})
		}
	}
	return out, nil
}

// Render builds a variant as kubectl apply -k would. An overlay with
// components is rendered through a kustomization that takes the overlay
// as its resource and adds the components, which is what an operator's
// components: list in the overlay does too.
func (t *Tree) Render(v Variant) (resmap.ResMap, error) {
	dir := path.Join(t.root, v.Overlay)
	if len(v.Components) > 0 {
		name := strings.NewReplacer("/", "-", " + ", "--").Replace(v.String())
		dir = path.Join(t.root, "variants", name)
		var b strings.Builder
		b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
		fmt.Fprintf(&b, "  - ../../%s\ncomponents:\n", v.Overlay)
		for _, c := range v.Components {
			fmt.Fprintf(&b, "  - ../../%s\n", c)
		}
		if err := t.fs.MkdirAll(dir); err != nil {
			return nil, err
		}
		if err := t.fs.WriteFile(path.Join(dir, "kustomization.yaml"), []byte(b.String())); err != nil {
			return nil, err
		}
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(t.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: kustomize: %w", v, err)
	}
	return rm, nil
}
