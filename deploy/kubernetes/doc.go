// Package kubernetes holds no code: this folder is the Kubernetes manifests
// of Bothy (see README.md here), and the package's test decodes every
// manifest strictly into the Kubernetes API types and checks what the
// manifests promise (probes, security context, the direct LISTEN URL, the
// migration Job, the disruption budget) against Bothy's configuration
// registry and the image that `make image` builds (internal/ociimage).
package kubernetes
