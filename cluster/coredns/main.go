// Command coredns is CoreDNS with only the plugins the local cluster's DNS needs: a much
// smaller and faster build than upstream's full plugin set. It serves cluster.local from the
// API server and answers NXDOMAIN for everything else (no forwarder: nothing leaves the machine).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	// The order in which plugins see a query, as in upstream's plugin.cfg.
	dnsserver.Directives = []string{"bind", "errors", "log", "template", "kubernetes"}
}

func main() {
	coremain.Run()
}
