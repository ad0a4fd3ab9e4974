// Command fakegpu is the Kubernetes device plugin of the local cluster's real nodes. In its
// default mode (--mode fake) it advertises nvidia.com/gpu devices that do not exist: GPU jobs can
// be scheduled onto real (CPU-only) nodes; a container it is allocated to gets
// NVIDIA_VISIBLE_DEVICES with the fake device ids, and KUBECTL_TAO_FAKE_GPU=1 so nothing can
// mistake them for real GPUs. With --mode passthrough it advertises the machine's real NVIDIA GPUs
// (their UUIDs as device ids) and gives each container the device nodes, the driver's user-space
// libraries and nvidia-smi of the GPUs it is allocated (passthrough.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const resourceName = "nvidia.com/gpu"

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	host    *host // nil: fake GPUs
	stop    chan struct{}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	// The device list never changes; keep the stream open until the plugin stops.
	select {
	case <-p.stop:
	case <-s.Context().Done():
	}
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		if p.host != nil {
			r, err := p.host.allocate(c.DevicesIds)
			if err != nil {
				return nil, err
			}
			resp.ContainerResponses = append(resp.ContainerResponses, r)
			continue
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{
				"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ","),
				"KUBECTL_TAO_FAKE_GPU":   "1",
			},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve starts the plugin's gRPC server on SOCK and registers it with the kubelet.
func serve(dir, sock string, p *plugin) (*grpc.Server, error) {
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(sock),
		ResourceName: resourceName,
	})
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// The longest path a unix socket can have (sun_path is 108 bytes with its terminating NUL).
const maxSocketPath = 107

func checkSocketPath(p string) error {
	if len(p) > maxSocketPath {
		return fmt.Errorf("the socket path %s is %d bytes, more than a unix socket allows (%d): use a shorter directory (KUBECTL_TAO_CLUSTER_DIR)", p, len(p), maxSocketPath)
	}
	return nil
}

func parseMinors(s string) ([]int, error) {
	var ms []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--minors must be device minors like 0,1, got %q", s)
		}
		ms = append(ms, n)
	}
	return ms, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fakegpu: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	cfg := defaultHostConfig()
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory")
	mode := flag.String("mode", "fake", "fake: advertise GPUs that do not exist; passthrough: the machine's real NVIDIA GPUs")
	count := flag.Int("count", 8, "fake mode: how many fake GPUs to advertise")
	prefix := flag.String("id-prefix", "FAKE-GPU", "fake mode: device id prefix (ids are PREFIX-0, PREFIX-1, ...)")
	flag.StringVar(&cfg.DevRoot, "dev-root", envOr("KUBECTL_TAO_GPU_DEV_ROOT", cfg.DevRoot), "passthrough: directory of the device nodes nvidiactl, nvidia<N>, ... (env KUBECTL_TAO_GPU_DEV_ROOT)")
	flag.StringVar(&cfg.ProcGPUs, "proc-gpus", envOr("KUBECTL_TAO_GPU_PROC_DIR", cfg.ProcGPUs), "passthrough: the driver's per-GPU information directory (env KUBECTL_TAO_GPU_PROC_DIR)")
	flag.StringVar(&cfg.SMI, "nvidia-smi", os.Getenv("KUBECTL_TAO_GPU_NVIDIA_SMI"), "passthrough: nvidia-smi to query and mount (default: found in the driver directory or on the usual bin dirs)")
	flag.StringVar(&cfg.DriverDir, "driver-dir", os.Getenv("KUBECTL_TAO_GPU_DRIVER_DIR"), "passthrough: a driver directory with lib64/ (and bin/) to mount whole at /usr/local/nvidia (default: /usr/local/nvidia if it holds libcuda.so.1, else the libraries found in --lib-dirs)")
	libDirs := flag.String("lib-dirs", envOr("KUBECTL_TAO_GPU_LIB_DIRS", strings.Join(cfg.LibDirs, ":")), "passthrough: colon-separated directories searched for the driver's libraries")
	minors := flag.String("minors", "", "passthrough: only these GPUs (device minors, comma-separated)")
	list := flag.Bool("list", false, "passthrough: print the GPUs found (minor, UUID, name, MiB; tab-separated) and exit")
	flag.Parse()
	cfg.LibDirs = filepath.SplitList(*libDirs)

	p := &plugin{stop: make(chan struct{})}
	switch *mode {
	case "fake":
		if *count < 1 {
			fail("--count must be at least 1, got %d", *count)
		}
		for i := 0; i < *count; i++ {
			p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("%s-%d", *prefix, i), Health: pluginapi.Healthy})
		}
	case "passthrough":
		h, err := discover(cfg)
		if err != nil {
			fail("%v", err)
		}
		if *minors != "" {
			ms, err := parseMinors(*minors)
			if err != nil {
				fail("%v", err)
			}
			if err := h.only(ms); err != nil {
				fail("%v", err)
			}
		}
		if *list {
			fmt.Print(h.describe())
			return
		}
		p.host = h
		p.devices = h.devices()
	default:
		fail("--mode must be fake or passthrough, got %q", *mode)
	}
	sock := filepath.Join(*dir, "fakegpu.sock")
	for _, s := range []string{sock, filepath.Join(*dir, "kubelet.sock")} {
		if err := checkSocketPath(s); err != nil {
			fail("%v", err)
		}
	}
	what := fmt.Sprintf("%d fake %s devices (no GPU exists)", len(p.devices), resourceName)
	if p.host != nil {
		what = fmt.Sprintf("%d real %s devices", len(p.devices), resourceName)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var srv *grpc.Server
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		// A restarted kubelet removes every socket in its directory: serve and register again.
		if _, err := os.Stat(sock); srv == nil || err != nil {
			if srv != nil {
				srv.Stop()
				srv = nil
			}
			s, err := serve(*dir, sock, p)
			if err != nil {
				log.Printf("fakegpu: not registered yet: %v", err)
			} else {
				srv = s
				log.Printf("fakegpu: registered %s", what)
			}
		}
		select {
		case <-sigs:
			close(p.stop)
			if srv != nil {
				srv.Stop()
			}
			_ = os.Remove(sock)
			return
		case <-tick.C:
		}
	}
}
