package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Admission is how the validating admission webhook at /admission/<cluster> serves one cluster
// (an admission "CLUSTER" block; the cluster also needs its cluster block, for the repository).
type Admission struct {
	// Mode is what happens to a write the policy refuses where its field block does not say:
	// "warn" (allowed, with a warning kubectl prints; the default, to start with) or "deny".
	Mode string
	// Token is the bearer token the cluster's API server sends (its admission kubeconfig's
	// token); read from TokenFile.
	Token     Secret
	TokenFile string
	// ClientCAFile holds the CA certificates the API server's client certificate must chain to
	// (its admission kubeconfig's client-certificate); needs admission_tls_cert_file.
	ClientCAFile string
	// Unauthenticated is authentication = "none": the API server cannot authenticate itself
	// (managed clusters), and the endpoint relies on TLS and network policy. Never implied.
	Unauthenticated bool
	// GitOpsUsers are the usernames (globs, * within the name) of the GitOps controllers: their
	// writes are Git's claim and are never denied.
	GitOpsUsers []string
	// Observe makes the admitted writes the cluster's observations, for a cluster without an
	// audit webhook: each is held until a later review of its object shows it landed, then
	// judged by the drift loop as its audit event would be (docs/admission.md).
	Observe bool
}

// DefaultGitOpsUsers are the service accounts Argo CD's application controller and Flux's
// controllers run as in their default installations.
var DefaultGitOpsUsers = []string{
	"system:serviceaccount:argocd:argocd-application-controller",
	"system:serviceaccount:flux-system:kustomize-controller",
	"system:serviceaccount:flux-system:helm-controller",
}

// admissionBlock is the HCL shape of an admission block.
type admissionBlock struct {
	Name           string    `hcl:"name,label"`
	Mode           *string   `hcl:"mode,optional"`
	TokenFile      *string   `hcl:"token_file,optional"`
	ClientCAFile   *string   `hcl:"client_ca_file,optional"`
	Authentication *string   `hcl:"authentication,optional"`
	GitOpsUsers    []string  `hcl:"gitops_users,optional"`
	Observe        *bool     `hcl:"observe,optional"`
	DefRange       hcl.Range `hcl:",def_range"`
}

// admissionMap reads the admission blocks: every problem reported, each naming its block.
func admissionMap(blocks []admissionBlock) (map[string]Admission, []error) {
	if len(blocks) == 0 {
		return nil, nil
	}
	m := map[string]Admission{}
	var errs []error
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d: admission %q", b.DefRange.Filename, b.DefRange.Start.Line, b.Name)
		if _, dup := m[b.Name]; dup {
			errs = append(errs, fmt.Errorf("%s is defined twice", where))
			continue
		}
		a := Admission{Mode: "warn", GitOpsUsers: DefaultGitOpsUsers}
		setP(&a.Mode, b.Mode)
		if a.Mode != "warn" && a.Mode != "deny" {
			errs = append(errs, fmt.Errorf("%s: mode = %q: want warn or deny", where, a.Mode))
		}
		if b.GitOpsUsers != nil {
			a.GitOpsUsers = b.GitOpsUsers
		}
		setP(&a.Observe, b.Observe)
		setP(&a.TokenFile, b.TokenFile)
		setP(&a.ClientCAFile, b.ClientCAFile)
		if a.TokenFile != "" {
			tok, err := os.ReadFile(a.TokenFile)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: token_file: %w", where, err))
			case len(strings.TrimSpace(string(tok))) < 16:
				errs = append(errs, fmt.Errorf("%s: token_file %s: want a token of 16 characters or more", where, a.TokenFile))
			default:
				a.Token = NewSecret(strings.TrimSpace(string(tok)))
			}
		}
		switch {
		case b.Authentication != nil && *b.Authentication == "none":
			if a.TokenFile != "" || a.ClientCAFile != "" {
				errs = append(errs, fmt.Errorf("%s: authentication = \"none\" with token_file or client_ca_file: choose", where))
			}
			a.Unauthenticated = true
		case b.Authentication != nil:
			errs = append(errs, fmt.Errorf("%s: authentication = %q: the only value is \"none\" (token_file and client_ca_file turn authentication on)", where, *b.Authentication))
		case a.TokenFile == "" && a.ClientCAFile == "":
			errs = append(errs, fmt.Errorf("%s: set token_file or client_ca_file (what the API server authenticates with), or authentication = \"none\" where it cannot (managed clusters)", where))
		}
		m[b.Name] = a
	}
	return m, errs
}

// validateAdmission checks that each admission block names a configured cluster and that TLS
// is set up where client certificates are to be checked.
func (c *Config) validateAdmission() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Admission)) {
		if _, ok := c.Clusters[name]; !ok {
			errs = append(errs, fmt.Errorf("admission %q: no cluster %q block names its repository", name, name))
		}
		if c.Admission[name].ClientCAFile != "" && c.AdmissionTLSCertFile == "" {
			errs = append(errs, fmt.Errorf("admission %q: client_ca_file needs admission_tls_cert_file and admission_tls_key_file (client certificates come over TLS)", name))
		}
	}
	if (c.AdmissionTLSCertFile == "") != (c.AdmissionTLSKeyFile == "") {
		errs = append(errs, fmt.Errorf("admission_tls_cert_file and admission_tls_key_file go together"))
	}
	if c.AdmissionListen != "" && c.AdmissionTLSCertFile == "" {
		errs = append(errs, fmt.Errorf("admission_listen = %q: the API server calls webhooks over HTTPS only; set admission_tls_cert_file and admission_tls_key_file", c.AdmissionListen))
	}
	return errs
}
