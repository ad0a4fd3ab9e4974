// Command k8s-multi is one binary for the Kubernetes commands a single-node GPU cluster needs:
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl share most of their
// code, so one binary called by any of those names (a link to it) is a fraction of their total size.
// It is what `make gpu-bundle` carries (scripts/gpu-bundle); the local cluster itself uses the
// separate binaries.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && name != "kubectl" && len(os.Args) > 1 {
		// k8s-multi NAME ARGS...
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	if name == "kubectl" {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	newCommand, ok := commands[name]
	if !ok {
		var names []string
		for n := range commands {
			names = append(names, n)
		}
		names = append(names, "kubectl")
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "k8s-multi: call me as one of %v (a link by that name, or k8s-multi NAME ARGS...)\n", names)
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
