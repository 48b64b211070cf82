// Command kube is a hyperkube-style build of the Kubernetes control plane for the lab: one binary
// that runs kube-apiserver, kube-controller-manager or kube-scheduler of k8s.io/kubernetes,
// chosen by its first argument (or by the name it is invoked as, e.g. through a symlink).
//
//	kube apiserver --etcd-servers=… …
//	kube controller-manager --kubeconfig=… …
//	kube scheduler --kubeconfig=… …
//
// See build.sh and README.md beside this file.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	_ "time/tzdata" // for CronJob time zones, as the upstream commands

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var commands = map[string]func() *cobra.Command{
	"apiserver":          apiserver.NewAPIServerCommand,
	"controller-manager": controllermanager.NewControllerManagerCommand,
	"scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name, args := strings.TrimPrefix(filepath.Base(os.Args[0]), "kube-"), os.Args[1:]
	if _, ok := commands[name]; !ok && len(args) > 0 {
		name, args = strings.TrimPrefix(args[0], "kube-"), args[1:]
	}

	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: kube apiserver|controller-manager|scheduler [flags]")
		os.Exit(2)
	}

	cmd := newCommand()
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
