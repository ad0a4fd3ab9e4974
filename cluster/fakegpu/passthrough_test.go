package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// stand-in device nodes: character devices with /dev/null's numbers (1, 3).
func mkdev(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatalf("mknod %s (the test runs as root): %v", path, err)
	}
}

func write(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

const (
	uuid0 = "GPU-5d2b7f0e-1c1a-4b7e-9a51-0c7a1f1e0001"
	uuid1 = "GPU-5d2b7f0e-1c1a-4b7e-9a51-0c7a1f1e0002"
)

// The layout of a driver's /proc/driver/nvidia/gpus/<bus id>/information file.
func procInfo(model, uuid string, minor int) string {
	return "Model: \t\t " + model + "\nIRQ:   \t\t 0\nGPU UUID: \t " + uuid +
		"\nVideo BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n" +
		"Bus Location: \t 0000:1b:00.0\nDevice Minor: \t " + string(rune('0'+minor)) + "\nGPU Excluded:\t No\n"
}

type standIn struct {
	cfg           hostConfig
	dev, lib, bin string
}

// newStandIn: two GPUs (minors 0 and 1), the control nodes, proc files, driver libraries in a lib
// directory (libcuda.so.1 a link, as the driver installs it) and an nvidia-smi that fails.
func newStandIn(t *testing.T) standIn {
	t.Helper()
	root := t.TempDir()
	s := standIn{dev: filepath.Join(root, "dev"), lib: filepath.Join(root, "lib"), bin: filepath.Join(root, "bin")}
	for _, d := range []string{s.dev, s.lib, s.bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"nvidiactl", "nvidia0", "nvidia1", "nvidia-uvm", "nvidia-uvm-tools"} {
		mkdev(t, filepath.Join(s.dev, n))
	}
	write(t, filepath.Join(s.dev, "nvidia-caps", "x"), "", 0o644) // not a GPU
	proc := filepath.Join(root, "proc")
	write(t, filepath.Join(proc, "0000:1b:00.0", "information"), procInfo("NVIDIA H200", uuid0, 0), 0o444)
	write(t, filepath.Join(proc, "0000:2b:00.0", "information"), procInfo("NVIDIA H200", uuid1, 1), 0o444)
	write(t, filepath.Join(s.lib, "libcuda.so.580.159.04"), "stand-in libcuda", 0o644)
	if err := os.Symlink("libcuda.so.580.159.04", filepath.Join(s.lib, "libcuda.so.1")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(s.lib, "libnvidia-ml.so.1"), "stand-in nvml", 0o644)
	write(t, filepath.Join(s.lib, "libc.so.6"), "not a driver library", 0o644)
	write(t, filepath.Join(s.bin, "nvidia-smi"), "#!/bin/sh\necho 'Failed to initialize NVML: Unknown Error'; exit 9\n", 0o755)
	s.cfg = hostConfig{DevRoot: s.dev, ProcGPUs: proc, LibDirs: []string{s.lib}, BinDirs: []string{s.bin}}
	return s
}

func mountsOf(r *pluginapi.ContainerAllocateResponse) map[string]string {
	m := map[string]string{}
	for _, x := range r.Mounts {
		if !x.ReadOnly {
			panic("a driver mount is not read-only: " + x.ContainerPath)
		}
		m[x.ContainerPath] = x.HostPath
	}
	return m
}

func devicesOf(r *pluginapi.ContainerAllocateResponse) []string {
	var ds []string
	for _, d := range r.Devices {
		ds = append(ds, d.ContainerPath+"="+d.HostPath+":"+d.Permissions)
	}
	sort.Strings(ds)
	return ds
}

func TestDiscoverFromProcAndAllocateOneGPU(t *testing.T) {
	s := newStandIn(t)
	h, err := discover(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.describe(); got != "0\t"+uuid0+"\tNVIDIA H200\t0\n1\t"+uuid1+"\tNVIDIA H200\t0\n" {
		t.Fatalf("describe: %q", got)
	}
	var ids []string
	for _, d := range h.devices() {
		ids = append(ids, d.ID)
		if d.Health != pluginapi.Healthy {
			t.Fatalf("device %s not healthy", d.ID)
		}
	}
	if !reflect.DeepEqual(ids, []string{uuid0, uuid1}) {
		t.Fatalf("device ids: %v", ids)
	}

	r, err := h.allocate([]string{uuid1})
	if err != nil {
		t.Fatal(err)
	}
	wantDevs := []string{
		"/dev/nvidia-uvm-tools=" + s.dev + "/nvidia-uvm-tools:rw",
		"/dev/nvidia-uvm=" + s.dev + "/nvidia-uvm:rw",
		"/dev/nvidia1=" + s.dev + "/nvidia1:rw",
		"/dev/nvidiactl=" + s.dev + "/nvidiactl:rw",
	}
	if got := devicesOf(r); !reflect.DeepEqual(got, wantDevs) {
		t.Fatalf("devices:\n got %v\nwant %v", got, wantDevs)
	}
	wantMounts := map[string]string{
		"/usr/local/nvidia/lib64/libcuda.so.1":          s.lib + "/libcuda.so.580.159.04",
		"/usr/local/nvidia/lib64/libcuda.so.580.159.04": s.lib + "/libcuda.so.580.159.04",
		"/usr/local/nvidia/lib64/libnvidia-ml.so.1":     s.lib + "/libnvidia-ml.so.1",
		"/usr/local/nvidia/bin/nvidia-smi":              s.bin + "/nvidia-smi",
		"/usr/bin/nvidia-smi":                           s.bin + "/nvidia-smi",
	}
	if got := mountsOf(r); !reflect.DeepEqual(got, wantMounts) {
		t.Fatalf("mounts:\n got %v\nwant %v", got, wantMounts)
	}
	wantEnv := map[string]string{
		"NVIDIA_VISIBLE_DEVICES": uuid1,
		"LD_LIBRARY_PATH":        "/usr/local/nvidia/lib64:/usr/local/nvidia/lib",
	}
	if !reflect.DeepEqual(r.Envs, wantEnv) {
		t.Fatalf("env: %v", r.Envs)
	}
}

func TestPluginAllocateEachContainer(t *testing.T) {
	s := newStandIn(t)
	h, err := discover(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &plugin{host: h, devices: h.devices()}
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{uuid0, uuid1}}, {DevicesIds: []string{uuid0}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ContainerResponses) != 2 {
		t.Fatalf("%d container responses", len(resp.ContainerResponses))
	}
	both := resp.ContainerResponses[0]
	if both.Envs["NVIDIA_VISIBLE_DEVICES"] != uuid0+","+uuid1 {
		t.Fatalf("env: %v", both.Envs)
	}
	if _, fake := both.Envs["KUBECTL_TAO_FAKE_GPU"]; fake {
		t.Fatal("a real GPU must not be marked fake")
	}
	if n := len(devicesOf(both)); n != 5 {
		t.Fatalf("two GPUs + 3 control nodes, got %d: %v", n, devicesOf(both))
	}
	if got := devicesOf(resp.ContainerResponses[1]); !strings.Contains(strings.Join(got, " "), "/dev/nvidia0=") ||
		strings.Contains(strings.Join(got, " "), "/dev/nvidia1=") {
		t.Fatalf("second container: %v", got)
	}

	_, err = p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"GPU-not-here"}},
	}})
	if err == nil || !strings.Contains(err.Error(), "unknown GPU GPU-not-here") {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestFakeModeUnchanged(t *testing.T) {
	p := &plugin{}
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"FAKE-GPU-0"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.ContainerResponses[0]
	if r.Envs["KUBECTL_TAO_FAKE_GPU"] != "1" || r.Envs["NVIDIA_VISIBLE_DEVICES"] != "FAKE-GPU-0" || len(r.Devices) != 0 || len(r.Mounts) != 0 {
		t.Fatalf("fake answer: %+v", r)
	}
}

func TestNvidiaSMIGivesNameAndMemory(t *testing.T) {
	s := newStandIn(t)
	// minor 1 listed first: nvidia-smi's order is the PCI order, not the minor's.
	write(t, filepath.Join(s.bin, "nvidia-smi"), "#!/bin/sh\n"+
		"[ \"$1\" = --query-gpu=minor_number,uuid,name,memory.total ] || exit 7\n"+
		"echo '1, "+uuid1+", NVIDIA H200, 143771'\necho '0, "+uuid0+", NVIDIA H200, 143771'\n", 0o755)
	h, err := discover(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.describe(); got != "0\t"+uuid0+"\tNVIDIA H200\t143771\n1\t"+uuid1+"\tNVIDIA H200\t143771\n" {
		t.Fatalf("describe: %q", got)
	}
}

func TestDriverDirMountedWhole(t *testing.T) {
	s := newStandIn(t)
	dd := filepath.Join(t.TempDir(), "nvidia")
	write(t, filepath.Join(dd, "lib64", "libcuda.so.1"), "stand-in", 0o644)
	write(t, filepath.Join(dd, "bin", "nvidia-smi"), "#!/bin/sh\nexit 9\n", 0o755)
	s.cfg.AutoDirs = []string{filepath.Join(t.TempDir(), "absent"), dd}
	s.cfg.BinDirs = nil
	h, err := discover(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.allocate([]string{uuid0})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/usr/local/nvidia": dd, "/usr/bin/nvidia-smi": dd + "/bin/nvidia-smi"}
	if got := mountsOf(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("mounts: %v", got)
	}
}

func TestOnlySomeMinors(t *testing.T) {
	s := newStandIn(t)
	h, err := discover(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.only([]int{1}); err != nil {
		t.Fatal(err)
	}
	if len(h.gpus) != 1 || h.gpus[0].UUID != uuid1 {
		t.Fatalf("gpus: %+v", h.gpus)
	}
	if _, err := h.allocate([]string{uuid0}); err == nil {
		t.Fatal("a GPU of another node was allocated")
	}
	if err := h.only([]int{7}); err == nil || !strings.Contains(err.Error(), "nvidia7") {
		t.Fatalf("minor 7: %v", err)
	}
	if _, err := parseMinors("0,x"); err == nil {
		t.Fatal("parseMinors accepted 0,x")
	}
}

func TestWhatIsMissingIsNamed(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(s standIn)
		want   string
	}{
		{"no nvidiactl", func(s standIn) { _ = os.Remove(filepath.Join(s.dev, "nvidiactl")) },
			"no NVIDIA driver: " + "DEV/nvidiactl is not a character device"},
		{"nvidiactl a plain file", func(s standIn) {
			_ = os.Remove(filepath.Join(s.dev, "nvidiactl"))
			_ = os.WriteFile(filepath.Join(s.dev, "nvidiactl"), nil, 0o644)
		}, "DEV/nvidiactl is not a character device"},
		{"no GPU node", func(s standIn) {
			_ = os.Remove(filepath.Join(s.dev, "nvidia0"))
			_ = os.Remove(filepath.Join(s.dev, "nvidia1"))
		}, "no NVIDIA GPU: DEV/nvidiactl exists but there is no DEV/nvidia<N> device node"},
		{"no UUID", func(s standIn) { _ = os.RemoveAll(filepath.Join(filepath.Dir(s.dev), "proc", "0000:2b:00.0")) },
			"no UUID for DEV/nvidia1"},
		{"no driver files", func(s standIn) { _ = os.RemoveAll(filepath.Join(filepath.Dir(s.dev), "proc")) },
			"no NVIDIA driver: no nvidia-smi and no GPU in"},
		{"no libcuda", func(s standIn) { _ = os.Remove(filepath.Join(s.lib, "libcuda.so.1")) },
			"no NVIDIA driver libraries: libcuda.so.1 not found in LIB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStandIn(t)
			c.break_(s)
			_, err := discover(s.cfg)
			want := strings.NewReplacer("DEV", s.dev, "LIB", s.lib).Replace(c.want)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want %q", err, want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("more than one line: %q", err)
			}
		})
	}
}

func TestSocketPathLimit(t *testing.T) {
	ok := "/" + strings.Repeat("a", maxSocketPath-1)
	if err := checkSocketPath(ok); err != nil {
		t.Fatalf("107 bytes refused: %v", err)
	}
	err := checkSocketPath(ok + "b")
	if err == nil || !strings.Contains(err.Error(), "is 108 bytes, more than a unix socket allows (107)") ||
		!strings.Contains(err.Error(), "KUBECTL_TAO_CLUSTER_DIR") {
		t.Fatalf("108 bytes: %v", err)
	}
}
