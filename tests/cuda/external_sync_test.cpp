// ExecutionContext::enqueue(stream, ExternalSync): a run chained to work outside qdeploy with no host wait in
// between. Both tests delay the producer's input copy (a host function sleeping on its stream first), so a run that
// did not wait would read the zeroed input and miss the CPU reference.
//   EventsChainAnotherStreamsWork     producer and engine on two streams of one process, through CUDA events;
//   TimelineSemaphoreAcrossProcesses  producer here, engine in a second process (this binary again, running
//                                     ConsumerProcess): a Vulkan timeline semaphore exported as an opaque fd and
//                                     passed over a Unix socket, input and output memory shared through cudaIpc.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda/gpu_test.h"
#include "qdeploy/qdeploy.h"
#include "test_util.h"

#if __has_include(<vulkan/vulkan.h>)
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#define QD_TEST_VULKAN 1
#endif

extern char** environ;

namespace qd {
namespace {

constexpr int kBatch = 1;  // the shipped ModelBN export has a fixed batch of 1
const std::vector<int64_t> kShape = {kBatch, 3, 32, 32};

std::string model_bn() { return test::source_dir() + "/models/model_bn.onnx"; }

qdeploy::HostTensor test_input() {
  qdeploy::HostTensor x(qdeploy::DataType::kFloat32, kShape);
  float* p = x.data_as<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<float>((i * 37) % 101) / 100.f;
  return x;
}

std::vector<float> cpu_reference(const qdeploy::HostTensor& x) {
  qdeploy::BuildOptions opt;
  opt.timing_cache = test::shared_timing_cache();
  opt.shapes = {{"input", kShape}};
  auto e = qdeploy::build(model_bn(), opt);
  EXPECT_TRUE(e) << e.status().message();
  if (!e) return {};
  auto out = e->run({{"input", x}});
  EXPECT_TRUE(out) << out.status().message();
  if (!out) return {};
  const float* p = (*out)[0].data_as<float>();
  return std::vector<float>(p, p + (*out)[0].numel());
}

Expected<qdeploy::Engine> cuda_engine() {
  qdeploy::BuildOptions opt;
  opt.timing_cache = test::shared_timing_cache();
  opt.device = qdeploy::Device::kCuda;
  opt.shapes = {{"input", kShape}};
  auto e = qdeploy::build(model_bn(), opt);
  if (!e) return internal(e.status().message());
  return std::move(*e);
}

// Fp32 engine against the reference: well within this, a run on the zeroed input is far outside it.
void expect_close(const std::vector<float>& got, const std::vector<float>& ref) {
  ASSERT_EQ(got.size(), ref.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(got[i] - ref[i])));
  EXPECT_LT(worst, 2e-2) << "the run did not see the producer's input";
}

void CUDART_CB sleep_100ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }

TEST(ExternalSync, EventsChainAnotherStreamsWork) {
  SKIP_WITHOUT_GPU();
  const qdeploy::HostTensor x = test_input();
  const std::vector<float> ref = cpu_reference(x);
  auto engine = cuda_engine();
  ASSERT_TRUE(engine) << engine.status().to_string();
  auto ctx = engine->create_context();
  ASSERT_TRUE(ctx) << ctx.status().message();
  ASSERT_TRUE((*ctx)->set_input_shapes({{"input", kShape}}));
  void *d_in = nullptr, *d_out = nullptr;
  const size_t out_count = ref.size();
  ASSERT_EQ(cudaMalloc(&d_in, x.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, out_count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_in, 0, x.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE((*ctx)->bind("input", d_in));
  ASSERT_TRUE((*ctx)->bind("output", d_out));

  auto producer = qdeploy::Stream::create(), consumer = qdeploy::Stream::create();
  auto ready = qdeploy::Event::create(false), done = qdeploy::Event::create(false);
  ASSERT_TRUE(producer && consumer && ready && done);
  auto pinned = qdeploy::PinnedBuffer::create(x.nbytes());
  ASSERT_TRUE(pinned);
  std::memcpy(pinned->data(), x.data(), x.nbytes());
  auto p = static_cast<cudaStream_t>(producer->handle());
  ASSERT_EQ(cudaLaunchHostFunc(p, sleep_100ms, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d_in, pinned->data(), x.nbytes(), cudaMemcpyHostToDevice, p), cudaSuccess);
  ASSERT_TRUE(ready->record(p));

  qdeploy::ExternalSync sync;
  sync.wait_events = {ready->handle()};
  sync.signal_events = {done->handle()};
  qdeploy::Status st = (*ctx)->enqueue(consumer->handle(), sync);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(done->synchronize());
  std::vector<float> got(out_count);
  ASSERT_EQ(cudaMemcpy(got.data(), d_out, out_count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  expect_close(got, ref);
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST(ExternalSync, RejectsNullHandles) {
  SKIP_WITHOUT_GPU();
  auto engine = cuda_engine();
  ASSERT_TRUE(engine) << engine.status().to_string();
  auto ctx = engine->create_context();
  ASSERT_TRUE(ctx);
  ASSERT_TRUE((*ctx)->set_input_shapes({{"input", kShape}}));
  qdeploy::ExternalSync sync;
  sync.wait_semaphores.push_back({nullptr, 1});
  qdeploy::Status st = (*ctx)->enqueue(nullptr, sync);
  EXPECT_EQ(st.code(), qdeploy::StatusCode::kInvalidArgument);
  EXPECT_EQ(qdeploy::ExternalSemaphore::import_fd(-1, qdeploy::SemaphoreType::kTimelineFd).status().code(),
            qdeploy::StatusCode::kInvalidArgument);
}

// ---- two processes ----

// What the producer sends the consumer (with the semaphore's fd as SCM_RIGHTS).
struct Handoff {
  cudaIpcMemHandle_t input, output;
};

bool send_with_fd(int sock, const void* data, size_t size, int fd) {
  iovec iov{const_cast<void*>(data), size};
  char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, 0) == static_cast<ssize_t>(size);
}

bool recv_with_fd(int sock, void* data, size_t size, int* fd) {
  iovec iov{data, size};
  char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(sock, &msg, MSG_WAITALL) != static_cast<ssize_t>(size)) return false;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return false;
  std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  return true;
}

// The consumer's report: 1 = enqueued and finished, 0 = failed (a message follows, up to 512 bytes).
struct Report {
  int ok = 0;
  char message[512] = {};
};

#ifdef QD_TEST_VULKAN
// A Vulkan timeline semaphore exportable as an opaque fd, on the Vulkan device that is CUDA device 0.
class VulkanSemaphore {
 public:
  ~VulkanSemaphore() {
    if (sem_) destroy_semaphore_(dev_, sem_, nullptr);
    if (dev_) destroy_device_(dev_, nullptr);
    if (inst_) destroy_instance_(inst_, nullptr);
    if (lib_) dlclose(lib_);
  }

  // Empty on success, else why there is none.
  std::string init() {
    lib_ = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return "no Vulkan loader (libvulkan.so.1); docs/python.md says how to carry one";
    auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib_, "vkGetInstanceProcAddr"));
    if (!gipa) return "libvulkan.so.1 has no vkGetInstanceProcAddr";
    auto create_instance = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ici{};
    ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ici.pApplicationInfo = &app;
    if (create_instance(&ici, nullptr, &inst_) != VK_SUCCESS) return "vkCreateInstance failed (no Vulkan driver?)";
#define QD_VK(name) auto name = reinterpret_cast<PFN_##name>(gipa(inst_, #name))
    QD_VK(vkEnumeratePhysicalDevices);
    QD_VK(vkGetPhysicalDeviceProperties2);
    QD_VK(vkCreateDevice);
    QD_VK(vkGetDeviceProcAddr);
    destroy_instance_ = reinterpret_cast<PFN_vkDestroyInstance>(gipa(inst_, "vkDestroyInstance"));
#undef QD_VK
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cudaGetDeviceProperties failed";
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(inst_, &n, nullptr);
    std::vector<VkPhysicalDevice> phys(n);
    vkEnumeratePhysicalDevices(inst_, &n, phys.data());
    VkPhysicalDevice match = VK_NULL_HANDLE;
    for (VkPhysicalDevice pd : phys) {
      VkPhysicalDeviceIDProperties id{};
      id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
      VkPhysicalDeviceProperties2 p2{};
      p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
      p2.pNext = &id;
      vkGetPhysicalDeviceProperties2(pd, &p2);
      if (std::memcmp(id.deviceUUID, prop.uuid.bytes, VK_UUID_SIZE) == 0) match = pd;
    }
    if (match == VK_NULL_HANDLE) return "no Vulkan device has CUDA device 0's UUID";
    const float priority = 1.f;
    VkDeviceQueueCreateInfo q{};
    q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    q.queueFamilyIndex = 0;
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    f12.timelineSemaphore = VK_TRUE;
    const char* ext[] = {VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME};
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.pNext = &f12;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &q;
    dci.enabledExtensionCount = 1;
    dci.ppEnabledExtensionNames = ext;
    if (vkCreateDevice(match, &dci, nullptr, &dev_) != VK_SUCCESS) {
      return "vkCreateDevice with timeline semaphores and VK_KHR_external_semaphore_fd failed";
    }
    auto gdpa = vkGetDeviceProcAddr;
    destroy_device_ = reinterpret_cast<PFN_vkDestroyDevice>(gdpa(dev_, "vkDestroyDevice"));
    destroy_semaphore_ = reinterpret_cast<PFN_vkDestroySemaphore>(gdpa(dev_, "vkDestroySemaphore"));
    get_fd_ = reinterpret_cast<PFN_vkGetSemaphoreFdKHR>(gdpa(dev_, "vkGetSemaphoreFdKHR"));
    auto create_semaphore = reinterpret_cast<PFN_vkCreateSemaphore>(gdpa(dev_, "vkCreateSemaphore"));
    VkSemaphoreTypeCreateInfo type{};
    type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    type.initialValue = 0;
    VkExportSemaphoreCreateInfo exp{};
    exp.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO;
    exp.pNext = &type;
    exp.handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
    VkSemaphoreCreateInfo sci{};
    sci.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    sci.pNext = &exp;
    if (create_semaphore(dev_, &sci, nullptr, &sem_) != VK_SUCCESS) return "vkCreateSemaphore (timeline) failed";
    return "";
  }

  // A new descriptor of the semaphore (each import takes one).
  int export_fd() const {
    VkSemaphoreGetFdInfoKHR info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR;
    info.semaphore = sem_;
    info.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
    int fd = -1;
    return get_fd_(dev_, &info, &fd) == VK_SUCCESS ? fd : -1;
  }

 private:
  void* lib_ = nullptr;
  VkInstance inst_ = VK_NULL_HANDLE;
  VkDevice dev_ = VK_NULL_HANDLE;
  VkSemaphore sem_ = VK_NULL_HANDLE;
  PFN_vkDestroyInstance destroy_instance_ = nullptr;
  PFN_vkDestroyDevice destroy_device_ = nullptr;
  PFN_vkDestroySemaphore destroy_semaphore_ = nullptr;
  PFN_vkGetSemaphoreFdKHR get_fd_ = nullptr;
};
#endif

TEST(ExternalSync, TimelineSemaphoreAcrossProcesses) {
  SKIP_WITHOUT_GPU();
#ifndef QD_TEST_VULKAN
  GTEST_SKIP() << "built without Vulkan headers (apt-get install libvulkan-dev): nothing here can make an "
                  "exportable semaphore";
#else
  VulkanSemaphore vk;
  if (std::string why = vk.init(); !why.empty()) GTEST_SKIP() << why;
  const int own_fd = vk.export_fd(), peer_fd = vk.export_fd();
  ASSERT_GE(own_fd, 0);
  ASSERT_GE(peer_fd, 0);
  auto sem = qdeploy::ExternalSemaphore::import_fd(own_fd, qdeploy::SemaphoreType::kTimelineFd);
  ASSERT_TRUE(sem) << sem.status().message();

  const qdeploy::HostTensor x = test_input();
  const std::vector<float> ref = cpu_reference(x);
  void *d_in = nullptr, *d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, x.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, ref.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_in, 0, x.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Handoff h{};
  ASSERT_EQ(cudaIpcGetMemHandle(&h.input, d_in), cudaSuccess);
  ASSERT_EQ(cudaIpcGetMemHandle(&h.output, d_out), cudaSuccess);

  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::string fd_var = "QD_EXTSYNC_SOCKET=" + std::to_string(sv[1]);
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  env.push_back(const_cast<char*>(fd_var.c_str()));
  env.push_back(nullptr);
  char filter[] = "--gtest_filter=ExternalSync.ConsumerProcess";
  char self[] = "/proc/self/exe";
  char* argv[] = {self, filter, nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, self, nullptr, nullptr, argv, env.data()), 0);
  close(sv[1]);
  ASSERT_TRUE(send_with_fd(sv[0], &h, sizeof(h), peer_fd));
  close(peer_fd);

  // The producer: (a delay) input copy, signal 1; then wait for 2 and copy the output back. No host wait.
  auto stream = qdeploy::Stream::create();
  auto pinned_in = qdeploy::PinnedBuffer::create(x.nbytes());
  auto pinned_out = qdeploy::PinnedBuffer::create(ref.size() * sizeof(float));
  ASSERT_TRUE(stream && pinned_in && pinned_out);
  std::memcpy(pinned_in->data(), x.data(), x.nbytes());
  auto s = static_cast<cudaStream_t>(stream->handle());
  ASSERT_EQ(cudaLaunchHostFunc(s, sleep_100ms, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d_in, pinned_in->data(), x.nbytes(), cudaMemcpyHostToDevice, s), cudaSuccess);
  qdeploy::ExternalSync produce, collect;
  produce.signal_semaphores.push_back({sem->handle(), 1});
  collect.wait_semaphores.push_back({sem->handle(), 2});
  ASSERT_TRUE(qdeploy::enqueue_signals(produce, s));
  ASSERT_TRUE(qdeploy::enqueue_waits(collect, s));
  ASSERT_EQ(cudaMemcpyAsync(pinned_out->data(), d_out, ref.size() * sizeof(float), cudaMemcpyDeviceToHost, s),
            cudaSuccess);

  Report report;
  pollfd pfd{sv[0], POLLIN, 0};
  const bool answered = poll(&pfd, 1, 180000) == 1 && recv(sv[0], &report, sizeof(report), MSG_WAITALL) ==
                                                           static_cast<ssize_t>(sizeof(report));
  if (!answered || !report.ok) {
    // Unblock our own stream before failing: nobody else will signal 2.
    qdeploy::ExternalSync unblock;
    unblock.signal_semaphores.push_back({sem->handle(), 2});
    auto other = qdeploy::Stream::create();
    if (other) {
      qdeploy::enqueue_signals(unblock, other->handle());
    }
  }
  ASSERT_TRUE(stream->synchronize());
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  close(sv[0]);
  ASSERT_TRUE(answered) << "the consumer process did not answer in 3 minutes";
  ASSERT_TRUE(report.ok) << "consumer: " << report.message;
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "the consumer's gtest run failed";
  std::vector<float> got(ref.size());
  std::memcpy(got.data(), pinned_out->data(), got.size() * sizeof(float));
  expect_close(got, ref);
  cudaFree(d_in);
  cudaFree(d_out);
#endif
}

// The second process of TimelineSemaphoreAcrossProcesses (skips when run on its own).
TEST(ExternalSync, ConsumerProcess) {
  const char* var = std::getenv("QD_EXTSYNC_SOCKET");
  if (!var) GTEST_SKIP() << "the consumer half of TimelineSemaphoreAcrossProcesses, which starts it";
  const int sock = std::atoi(var);
  Report report;
  auto fail = [&](const std::string& why) {
    std::snprintf(report.message, sizeof(report.message), "%s", why.c_str());
    report.ok = 0;
    send(sock, &report, sizeof(report), 0);
    FAIL() << why;
  };
  Handoff h{};
  int fd = -1;
  if (!recv_with_fd(sock, &h, sizeof(h), &fd)) return fail("no handoff message");
  auto sem = qdeploy::ExternalSemaphore::import_fd(fd, qdeploy::SemaphoreType::kTimelineFd);
  if (!sem) return fail(sem.status().message());
  void *d_in = nullptr, *d_out = nullptr;
  if (cudaIpcOpenMemHandle(&d_in, h.input, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess ||
      cudaIpcOpenMemHandle(&d_out, h.output, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
    return fail("cudaIpcOpenMemHandle failed");
  }
  auto engine = cuda_engine();
  if (!engine) return fail(engine.status().to_string());
  auto ctx = engine->create_context();
  if (!ctx) return fail(ctx.status().message());
  qdeploy::Status st = (*ctx)->set_input_shapes({{"input", kShape}});
  if (st) st = (*ctx)->bind("input", d_in);
  if (st) st = (*ctx)->bind("output", d_out);
  auto stream = qdeploy::Stream::create();
  if (!stream) return fail(stream.status().message());
  qdeploy::ExternalSync sync;
  sync.wait_semaphores.push_back({sem->handle(), 1});
  sync.signal_semaphores.push_back({sem->handle(), 2});
  if (st) st = (*ctx)->enqueue(stream->handle(), sync);
  if (!st) return fail(st.message());
  // The producer signals 1 on its own; a producer that failed before that never will, so poll with a deadline
  // rather than block in a synchronize forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  cudaError_t q = cudaErrorNotReady;
  while ((q = cudaStreamQuery(static_cast<cudaStream_t>(stream->handle()))) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (q != cudaSuccess) return fail(std::string("the run did not finish: ") + cudaGetErrorString(q));
  cudaIpcCloseMemHandle(d_in);
  cudaIpcCloseMemHandle(d_out);
  report.ok = 1;
  send(sock, &report, sizeof(report), 0);
}

}  // namespace
}  // namespace qd
