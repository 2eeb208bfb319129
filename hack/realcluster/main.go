// Command realcluster is one binary holding the control-plane components tasq's
// real-cluster tests run: etcd (embedded), kube-apiserver, kube-controller-manager
// and kube-scheduler of Kubernetes v1.37, picked by the first argument. The `up`
// script beside this file builds it (with kwok) and starts the processes.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: realcluster etcd|kube-apiserver|kube-controller-manager|kube-scheduler [flags]")
		os.Exit(2)
	}
	role, args := os.Args[1], os.Args[2:]
	os.Args = append([]string{role}, args...)
	switch role {
	case "etcd":
		os.Exit(runEtcd(args))
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	default:
		fmt.Fprintf(os.Stderr, "realcluster: unknown role %q\n", role)
		os.Exit(2)
	}
}

// runEtcd serves a single-member etcd on a loopback client URL until SIGINT/SIGTERM.
// Peer traffic stays on loopback too: the member never joins a cluster.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory for etcd's data (required)")
	clientURL := fs.String("listen-client-url", "http://127.0.0.1:2379", "client URL")
	peerURL := fs.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		return 2
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-client-url: %v\n", err)
		return 2
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-peer-url: %v\n", err)
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.Name = "realcluster"
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "warn"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	}
	fmt.Fprintln(os.Stderr, "etcd: ready")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		return 0
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
}
