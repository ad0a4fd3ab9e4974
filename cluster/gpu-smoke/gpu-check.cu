// gpu-check: the job gpu-smoke runs on a real GPU through the local cluster. It names the GPUs the
// container sees, runs a saxpy over 16M floats and checks every result (exit 0 only if all are right);
// with --oom it allocates GPU memory 1 GiB at a time until CUDA refuses (exit 3), so that `kubectl tao
// explain` has a job that ran out of GPU memory to explain. Built on the GPU host with its own nvcc
// (`nvcc -O2 -o gpu-check gpu-check.cu`, the CUDA runtime linked statically): nothing is pulled.
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static int fail(const char *what, cudaError_t e) {
  std::printf("gpu-check: %s failed: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return 2;
}

int main(int argc, char **argv) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return fail("cudaGetDeviceCount", e);
  cudaDeviceProp prop;
  for (int d = 0; d < count; d++) {
    if ((e = cudaGetDeviceProperties(&prop, d)) != cudaSuccess) return fail("cudaGetDeviceProperties", e);
    std::printf("gpu-check: GPU %d: %s, %zu MiB, compute capability %d.%d\n", d, prop.name,
                prop.totalGlobalMem >> 20, prop.major, prop.minor);
  }
  cudaGetDeviceProperties(&prop, 0);

  if (argc > 1 && std::strcmp(argv[1], "--oom") == 0) {
    const size_t chunk = size_t(1) << 30;
    size_t total = 0;
    void *p = nullptr;
    while ((e = cudaMalloc(&p, chunk)) == cudaSuccess) total += chunk;
    std::printf("gpu-check: cudaMalloc of 1024 MiB more after %zu MiB failed: %s (%s)\n", total >> 20,
                cudaGetErrorString(e), cudaGetErrorName(e));
    return 3;
  }

  const int n = 1 << 24;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  float *dx = nullptr, *dy = nullptr;
  if ((e = cudaMalloc(&dx, n * sizeof(float))) != cudaSuccess) return fail("cudaMalloc", e);
  if ((e = cudaMalloc(&dy, n * sizeof(float))) != cudaSuccess) return fail("cudaMalloc", e);
  cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  saxpy<<<(n + 255) / 256, 256>>>(n, 3.0f, dx, dy);
  if ((e = cudaGetLastError()) != cudaSuccess) return fail("the saxpy kernel launch", e);
  if ((e = cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess)
    return fail("cudaMemcpy", e);
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += y[i] != 5.0f;
  if (wrong) {
    std::printf("gpu-check: saxpy on %s: %d of %d results wrong\n", prop.name, wrong, n);
    return 1;
  }
  std::printf("gpu-check: saxpy of %d floats on %s: all correct\n", n, prop.name);
  return 0;
}
