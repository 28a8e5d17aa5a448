// Command coredns is CoreDNS v1.12.1 with a subset of its plugins, built by ../build-set.sh for the
// CoreDNS image of the kind node images (kubeadm v1.34's CoreDNS version); see ../../README.md,
// "The kind set".
//
// Upstream's main package (github.com/coredns/coredns) links every plugin of its plugin.cfg,
// cloud DNS providers and tracing included, and is the longest compile of the kind set. CoreDNS's
// documented way to a smaller binary is a build with a subset of plugin.cfg; this package is that
// subset, written as imports instead of a regenerated plugin list:
//
//   - coremain is CoreDNS's start-up (flags, Corefile loading, servers);
//   - core/dnsserver registers the "dns" server type with upstream's full, ordered directive
//     list (dnsserver.Directives), so the chain order of the plugins below is upstream's. A
//     directive in that list whose plugin is not linked is never registered: a Corefile naming it
//     fails to load with "no action found for directive ... (missing a plugin?)";
//   - each plugin package registers its directive in its init function.
//
// What kubeadm's and kind's default Corefile use: errors, health, ready, kubernetes, prometheus
// (package metrics), forward, cache, loop, reload, loadbalance. What an operator commonly adds
// and costs little to compile: the rest. k8s_external needs only what kubernetes needs.
// dnstap and transfer are listed because forward and kubernetes import them (and so register
// them) anyway. Not linked: the cloud providers (route53, azure, clouddns), trace, etcd, grpc,
// geoip, nomad, file, auto, secondary, sign, dnssec, tls, quic and the other plugins of
// plugin.cfg not named here.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/acl"
	_ "github.com/coredns/coredns/plugin/any"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/cancel"
	_ "github.com/coredns/coredns/plugin/chaos"
	_ "github.com/coredns/coredns/plugin/debug"
	_ "github.com/coredns/coredns/plugin/dnstap"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/header"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/k8s_external"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/local"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metadata"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/minimal"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/root"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/transfer"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() {
	coremain.Run()
}
