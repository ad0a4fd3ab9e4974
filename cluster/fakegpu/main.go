// Command fakegpu is a Kubernetes device plugin that advertises nvidia.com/gpu devices that do
// not exist. It lets GPU jobs be scheduled onto the local cluster's real (CPU-only) nodes; a
// container it is allocated to gets NVIDIA_VISIBLE_DEVICES with the fake device ids, and
// KUBECTL_TAO_FAKE_GPU=1 so nothing can mistake them for real GPUs.
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

func main() {
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory")
	count := flag.Int("count", 8, "how many fake GPUs to advertise")
	prefix := flag.String("id-prefix", "FAKE-GPU", "device id prefix (ids are PREFIX-0, PREFIX-1, ...)")
	flag.Parse()
	if *count < 1 {
		log.Fatalf("fakegpu: --count must be at least 1, got %d", *count)
	}

	p := &plugin{stop: make(chan struct{})}
	for i := 0; i < *count; i++ {
		p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("%s-%d", *prefix, i), Health: pluginapi.Healthy})
	}
	sock := filepath.Join(*dir, "fakegpu.sock")

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
				log.Printf("fakegpu: registered %d fake %s devices (no GPU exists)", *count, resourceName)
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
