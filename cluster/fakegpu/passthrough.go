package main

// Passthrough mode: advertise the machine's real NVIDIA GPUs and give a container what it needs to
// use the ones it is allocated, with no NVIDIA Container Toolkit: the device nodes, the driver's
// user-space libraries and nvidia-smi (read-only bind mounts), and NVIDIA_VISIBLE_DEVICES.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Where the driver's user space appears inside a container: the directory CUDA base images already
// put on PATH and LD_LIBRARY_PATH (/usr/local/nvidia/bin, /usr/local/nvidia/lib64).
const (
	ctrDriverDir = "/usr/local/nvidia"
	ctrLibDir    = ctrDriverDir + "/lib64"
	ctrBinDir    = ctrDriverDir + "/bin"
	ctrLdPath    = ctrDriverDir + "/lib64:" + ctrDriverDir + "/lib"
)

// hostConfig says where to look on the host; every path can be pointed at stand-ins.
type hostConfig struct {
	DevRoot   string   // directory of the device nodes (/dev)
	ProcGPUs  string   // /proc/driver/nvidia/gpus
	SMI       string   // nvidia-smi to run and mount; "" = search BinDirs
	DriverDir string   // a driver directory with bin/ and lib64/ (e.g. /usr/local/nvidia); "" = auto
	AutoDirs  []string // driver directories to use when DriverDir is "" and one holds libcuda.so.1
	LibDirs   []string // where to look for the driver's libraries when there is no driver directory
	BinDirs   []string // where to look for nvidia-smi
}

func defaultHostConfig() hostConfig {
	return hostConfig{
		DevRoot:  "/dev",
		ProcGPUs: "/proc/driver/nvidia/gpus",
		LibDirs: []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
			"/usr/lib", "/lib/x86_64-linux-gnu", "/lib64", "/lib"},
		BinDirs:  []string{"/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin"},
		AutoDirs: []string{ctrDriverDir},
	}
}

// gpu is one real GPU: its device minor (/dev/nvidiaN), UUID, product name and memory (0: unknown).
type gpu struct {
	Minor     int
	UUID      string
	Name      string
	MemoryMiB int
}

// host is what discovery found: the GPUs, the control device nodes every container needs, and the
// driver's user space to mount.
type host struct {
	cfg     hostConfig
	gpus    []gpu
	control []string // base names under DevRoot: nvidiactl, nvidia-uvm, ...
	mounts  []*pluginapi.Mount
}

// The driver's user-space libraries a CUDA or NVML program loads (the set the container toolkit
// mounts for the compute and utility capabilities).
var driverLibs = []string{"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjit.so", "libnvidia-nvvm.so",
	"libnvidia-gpucomp.so", "libcudadebugger.so", "libnvidia-allocator.so", "libnvidia-cfg.so",
	"libnvidia-opencl.so", "libnvidia-pkcs11.so", "libnvidia-pkcs11-openssl3.so"}

var gpuNode = regexp.MustCompile(`^nvidia([0-9]+)$`)

func isCharDevice(path string) bool {
	var st syscall.Stat_t
	return syscall.Stat(path, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFCHR
}

// discover finds the GPUs and the driver; every error is one line naming what is missing.
func discover(cfg hostConfig) (*host, error) {
	ctl := filepath.Join(cfg.DevRoot, "nvidiactl")
	if !isCharDevice(ctl) {
		return nil, fmt.Errorf("no NVIDIA driver: %s is not a character device (is the nvidia kernel module loaded?)", ctl)
	}
	entries, err := os.ReadDir(cfg.DevRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot read the device directory %s: %v", cfg.DevRoot, err)
	}
	var minors []int
	for _, e := range entries {
		if m := gpuNode.FindStringSubmatch(e.Name()); m != nil && isCharDevice(filepath.Join(cfg.DevRoot, e.Name())) {
			n, _ := strconv.Atoi(m[1])
			minors = append(minors, n)
		}
	}
	if len(minors) == 0 {
		return nil, fmt.Errorf("no NVIDIA GPU: %s exists but there is no %s/nvidia<N> device node", ctl, cfg.DevRoot)
	}
	sort.Ints(minors)
	h := &host{cfg: cfg}
	h.control = []string{"nvidiactl"}
	for _, name := range []string{"nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"} {
		if isCharDevice(filepath.Join(cfg.DevRoot, name)) {
			h.control = append(h.control, name)
		}
	}

	if cfg.DriverDir == "" {
		for _, d := range cfg.AutoDirs {
			if hasLibcuda(d) {
				cfg.DriverDir = d
				break
			}
		}
	}
	h.cfg = cfg
	smi := cfg.SMI
	if smi == "" && cfg.DriverDir != "" {
		smi = findFile([]string{filepath.Join(cfg.DriverDir, "bin")}, "nvidia-smi")
	}
	if smi == "" {
		smi = findFile(cfg.BinDirs, "nvidia-smi")
	}
	info := map[int]gpu{}
	if smi != "" {
		info, err = gpusFromSMI(smi)
		if err != nil {
			// nvidia-smi can fail where the driver files still name the GPUs: try those.
			info = map[int]gpu{}
		}
	}
	if len(info) == 0 {
		info, err = gpusFromProc(cfg.ProcGPUs)
		if err != nil {
			return nil, err
		}
	}
	for _, m := range minors {
		g, ok := info[m]
		if !ok || g.UUID == "" {
			return nil, fmt.Errorf("no UUID for %s/nvidia%d: neither nvidia-smi nor %s/*/information names it", cfg.DevRoot, m, cfg.ProcGPUs)
		}
		g.Minor = m
		h.gpus = append(h.gpus, g)
	}
	h.mounts, err = driverMounts(cfg, smi)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func findFile(dirs []string, name string) string {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// gpusFromSMI runs `nvidia-smi --query-gpu` and reads one GPU a line: minor, UUID, name, memory (MiB).
func gpusFromSMI(smi string) (map[int]gpu, error) {
	out, err := exec.Command(smi, "--query-gpu=minor_number,uuid,name,memory.total",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil, fmt.Errorf("%s failed: %v", smi, err)
	}
	return parseSMI(out)
}

func parseSMI(out []byte) (map[int]gpu, error) {
	gpus := map[int]gpu{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("unexpected nvidia-smi line: %q", line)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		minor, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("unexpected nvidia-smi minor number: %q", f[0])
		}
		mem, _ := strconv.Atoi(f[3]) // "[N/A]" on some boards: unknown
		gpus[minor] = gpu{Minor: minor, UUID: f[1], Name: f[2], MemoryMiB: mem}
	}
	return gpus, sc.Err()
}

// gpusFromProc reads the driver's /proc/driver/nvidia/gpus/<bus id>/information files.
func gpusFromProc(dir string) (map[int]gpu, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "information"))
	gpus := map[int]gpu{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		g := gpu{Minor: -1}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "Model":
				g.Name = v
			case "GPU UUID":
				g.UUID = v
			case "Device Minor":
				if n, err := strconv.Atoi(v); err == nil {
					g.Minor = n
				}
			}
		}
		if g.Minor >= 0 && g.UUID != "" {
			gpus[g.Minor] = g
		}
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("no NVIDIA driver: no nvidia-smi and no GPU in %s/*/information", dir)
	}
	return gpus, nil
}

func roMount(hostPath, ctrPath string) *pluginapi.Mount {
	return &pluginapi.Mount{ContainerPath: ctrPath, HostPath: hostPath, ReadOnly: true}
}

// driverMounts: a driver directory (bin/, lib64/) is mounted whole at /usr/local/nvidia; otherwise
// each driver library found in LibDirs is mounted under /usr/local/nvidia/lib64. nvidia-smi goes to
// /usr/local/nvidia/bin and /usr/bin (the rendered jobs call it by name).
func driverMounts(cfg hostConfig, smi string) ([]*pluginapi.Mount, error) {
	dd := cfg.DriverDir
	var mounts []*pluginapi.Mount
	if dd != "" {
		if !hasLibcuda(dd) {
			return nil, fmt.Errorf("no NVIDIA driver libraries: no libcuda.so.1 in %s/lib64 or %s/lib", dd, dd)
		}
		mounts = append(mounts, roMount(dd, ctrDriverDir))
	} else {
		seen := map[string]bool{}
		for _, d := range cfg.LibDirs {
			for _, lib := range driverLibs {
				names, _ := filepath.Glob(filepath.Join(d, lib+"*"))
				sort.Strings(names)
				for _, p := range names {
					base := filepath.Base(p)
					if seen[base] {
						continue
					}
					real, err := filepath.EvalSymlinks(p)
					if err != nil {
						continue
					}
					if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
						continue
					}
					seen[base] = true
					mounts = append(mounts, roMount(real, ctrLibDir+"/"+base))
				}
			}
		}
		if !seen["libcuda.so.1"] {
			return nil, fmt.Errorf("no NVIDIA driver libraries: libcuda.so.1 not found in %s", strings.Join(cfg.LibDirs, ", "))
		}
	}
	if smi != "" {
		real, err := filepath.EvalSymlinks(smi)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve %s: %v", smi, err)
		}
		if dd == "" {
			mounts = append(mounts, roMount(real, ctrBinDir+"/nvidia-smi"))
		}
		mounts = append(mounts, roMount(real, "/usr/bin/nvidia-smi"))
	}
	return mounts, nil
}

// hasLibcuda: DIR/lib64 or DIR/lib holds libcuda.so.1 (a file, or a link to one).
func hasLibcuda(dir string) bool {
	return findFile([]string{filepath.Join(dir, "lib64"), filepath.Join(dir, "lib")}, "libcuda.so.1") != ""
}

func (h *host) devices() []*pluginapi.Device {
	var ds []*pluginapi.Device
	for _, g := range h.gpus {
		ds = append(ds, &pluginapi.Device{ID: g.UUID, Health: pluginapi.Healthy})
	}
	return ds
}

// allocate is the answer for one container that was given the GPUs with these UUIDs.
func (h *host) allocate(ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	byUUID := map[string]gpu{}
	for _, g := range h.gpus {
		byUUID[g.UUID] = g
	}
	r := &pluginapi.ContainerAllocateResponse{
		Envs: map[string]string{
			"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ","),
			"LD_LIBRARY_PATH":        ctrLdPath,
		},
		Mounts: h.mounts,
	}
	for _, id := range ids {
		g, ok := byUUID[id]
		if !ok {
			return nil, errors.New("unknown GPU " + id)
		}
		p := fmt.Sprintf("nvidia%d", g.Minor)
		r.Devices = append(r.Devices, &pluginapi.DeviceSpec{
			ContainerPath: "/dev/" + p, HostPath: filepath.Join(h.cfg.DevRoot, p), Permissions: "rw"})
	}
	for _, c := range h.control {
		r.Devices = append(r.Devices, &pluginapi.DeviceSpec{
			ContainerPath: "/dev/" + c, HostPath: filepath.Join(h.cfg.DevRoot, c), Permissions: "rw"})
	}
	return r, nil
}

// describe prints one GPU a line for scripts: minor, UUID, name, memory in MiB (0: unknown), tab-separated.
func (h *host) describe() string {
	var b strings.Builder
	for _, g := range h.gpus {
		fmt.Fprintf(&b, "%d\t%s\t%s\t%d\n", g.Minor, g.UUID, g.Name, g.MemoryMiB)
	}
	return b.String()
}

// only keeps the GPUs whose minors are listed (a node of several gets its share).
func (h *host) only(minors []int) error {
	keep := map[int]bool{}
	for _, m := range minors {
		keep[m] = true
	}
	var gs []gpu
	for _, g := range h.gpus {
		if keep[g.Minor] {
			gs = append(gs, g)
			delete(keep, g.Minor)
		}
	}
	for m := range keep {
		return fmt.Errorf("--minors names nvidia%d, which is not a GPU of this machine", m)
	}
	h.gpus = gs
	return nil
}
