// Probe: how many thread-block clusters of each size fit on this GPU at once
// (cudaOccupancyMaxActiveClusters), and which SMs a full launch of them
// occupies (each block records %smid). Used to see how many SMs a
// row kernel in clusters of C blocks can use (session 19).
//   nvcc -arch=sm_90 -O2 -o cluster_occupancy cluster_occupancy.cu && ./cluster_occupancy
#include <cooperative_groups.h>
#include <cstdio>
#include <set>
#include <vector>

__global__ void record(int* sm, int spinNs) {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  if (threadIdx.x == 0) sm[blockIdx.x] = static_cast<int>(s);
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > static_cast<unsigned long long>(spinNs)) break;
  }
}

int main() {
  cudaFuncSetAttribute(record, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(record, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  printf("SMs %d\n", sms);
  int* d = nullptr;
  cudaMalloc(&d, 4096 * sizeof(int));
  for (int threads : {512, 1024})
    for (int smem : {1024, 140 * 1024})
      for (int c : {1, 2, 4, 6, 8, 12, 16}) {
        cudaLaunchConfig_t cfg{};
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = c;
        attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
        cfg.gridDim = dim3(c);
        cfg.blockDim = dim3(threads);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        int clusters = 0;
        cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, record, &cfg);
        if (e != cudaSuccess) {
          printf("threads %d smem %d cluster %d: %s\n", threads, smem, c, cudaGetErrorString(e));
          cudaGetLastError();
          continue;
        }
        int blocks = clusters * c;
        cfg.gridDim = dim3(blocks);
        e = cudaLaunchKernelEx(&cfg, record, d, 2000000);
        cudaDeviceSynchronize();
        std::vector<int> h(blocks);
        cudaMemcpy(h.data(), d, blocks * sizeof(int), cudaMemcpyDeviceToHost);
        std::set<int> used(h.begin(), h.end());
        printf("threads %d smem %d cluster %2d: %3d clusters, %3d blocks on %3d SMs (%s)", threads, smem, c, clusters,
               blocks, static_cast<int>(used.size()), cudaGetErrorString(e));
        if (c == 8 || c == 4) {
          printf("\n   clusters' SMs:");
          for (int k = 0; k < clusters; ++k) {
            printf(" [");
            for (int j = 0; j < c; ++j) printf("%s%d", j ? "," : "", h[k * c + j]);
            printf("]");
          }
          std::set<int> all;
          for (int s = 0; s < sms; ++s) all.insert(s);
          for (int s : used) all.erase(s);
          printf("\n   idle SMs:");
          for (int s : all) printf(" %d", s);
        }
        printf("\n");
      }
  return 0;
}
