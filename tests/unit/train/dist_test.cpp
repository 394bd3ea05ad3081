// Distributed communicators: environment parsing, the TCP communicator in threads of one process (world sizes
// 1-4) and in two real processes, its failure modes, and NCCL on two GPUs (skipped without them).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/cuda_runtime.h"
#include "gtest/gtest.h"
#include "train/dist/dist.h"
#include "train/dist/tcp_group.h"

extern char** environ;

namespace kiln::train {
namespace {

using Vars = std::map<std::string, std::string>;

Result<DistConfig> from_vars(const Vars& vars) {
  return dist_config_from_env([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(const Vars& vars) {
  auto config = from_vars(vars);
  return config.is_ok() ? "ok" : config.status().message();
}

TEST(DistEnv, NothingSetIsOneProcess) {
  auto config = from_vars({});
  ASSERT_TRUE(config.is_ok());
  EXPECT_EQ(config->world_size, 1);
  EXPECT_EQ(config->rank, 0);
  EXPECT_FALSE(config->enabled());
}

TEST(DistEnv, GenericVariables) {
  auto config = from_vars({{"RANK", "1"},
                           {"WORLD_SIZE", "4"},
                           {"LOCAL_RANK", "0"},
                           {"MASTER_ADDR", "node0"},
                           {"MASTER_PORT", "1234"},
                           {"KILN_DIST_TIMEOUT", "2.5"}});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->rank, 1);
  EXPECT_EQ(config->world_size, 4);
  EXPECT_EQ(config->local_rank, 0);
  EXPECT_EQ(config->master_addr, "node0");
  EXPECT_EQ(config->master_port, 1234);
  EXPECT_EQ(config->timeout_seconds, 2.5);
  EXPECT_TRUE(config->enabled());
}

TEST(DistEnv, KilnVariablesWinAndLocalRankDefaultsToRank) {
  auto config = from_vars({{"KILN_RANK", "2"}, {"RANK", "0"}, {"KILN_WORLD_SIZE", "3"}, {"WORLD_SIZE", "8"}});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->rank, 2);
  EXPECT_EQ(config->world_size, 3);
  EXPECT_EQ(config->local_rank, 2);
  EXPECT_EQ(config->master_addr, "127.0.0.1");
  EXPECT_EQ(config->master_port, 29500);
}

TEST(DistEnv, OpenMpi) {
  auto config =
      from_vars({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->rank, 3);
  EXPECT_EQ(config->world_size, 4);
  EXPECT_EQ(config->local_rank, 1);
  EXPECT_EQ(config->master_addr, "127.0.0.1");
  // Two launchers that disagree: an error naming both.
  std::string e = error_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"RANK", "1"}});
  EXPECT_NE(e.find("RANK='1'"), std::string::npos) << e;
  EXPECT_NE(e.find("OMPI_COMM_WORLD_RANK='3'"), std::string::npos) << e;
  // ... unless KILN_RANK says which.
  auto chosen =
      from_vars({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"RANK", "1"}, {"KILN_RANK", "1"}});
  ASSERT_TRUE(chosen.is_ok()) << chosen.status().message();
  EXPECT_EQ(chosen->rank, 1);
}

TEST(DistEnv, BadValuesNameTheVariable) {
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos ? testing::AssertionSuccess()
                                                : testing::AssertionFailure() << "'" << text << "' lacks " << part;
  };
  EXPECT_TRUE(has(error_of({{"RANK", "abc"}, {"WORLD_SIZE", "2"}}), "RANK='abc'"));
  EXPECT_TRUE(has(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), "from 0 to 1"));
  EXPECT_TRUE(has(error_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), "RANK='-1'"));
  EXPECT_TRUE(has(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE='0'"));
  EXPECT_TRUE(has(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}), "WORLD_SIZE='2x'"));
  EXPECT_TRUE(has(error_of({{"RANK", "1"}}), "world size is not"));
  EXPECT_TRUE(has(error_of({{"WORLD_SIZE", "2"}}), "rank is not"));
  EXPECT_TRUE(has(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}), "MASTER_PORT='70000'"));
  EXPECT_TRUE(has(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a b"}}), "MASTER_ADDR='a b'"));
  EXPECT_TRUE(has(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}}), "LOCAL_RANK='x'"));
  EXPECT_TRUE(has(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"KILN_DIST_TIMEOUT", "-1"}}), "KILN_DIST_TIMEOUT"));
  EXPECT_TRUE(has(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"KILN_DIST_TIMEOUT", "5s"}}), "KILN_DIST_TIMEOUT"));
  // One process without a rank is fine.
  EXPECT_EQ(error_of({{"WORLD_SIZE", "1"}}), "ok");
}

// A port nobody listens on right now (bound to port 0, then released).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

DistConfig config_for(int rank, int world, int port, double timeout = 20) {
  DistConfig c;
  c.rank = rank;
  c.world_size = world;
  c.local_rank = rank;
  c.master_port = port;
  c.timeout_seconds = timeout;
  c.chunk_bytes = 4096;  // 1024 floats: the tests' big tensor spans several chunks
  return c;
}

// Runs `body(rank, communicator)` on `world` threads; a rank whose communicator cannot be created fails the test.
void run_world(int world, const std::function<void(int, Communicator&)>& body, double timeout = 20) {
  const int port = free_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Communicator::create(config_for(r, world, port, timeout), Device::cpu());
      ASSERT_TRUE(comm.is_ok()) << "rank " << r << ": " << comm.status().message();
      EXPECT_EQ((*comm)->rank(), r);
      EXPECT_EQ((*comm)->world_size(), world);
      body(r, **comm);
    });
  }
  for (auto& t : threads) t.join();
}

const std::vector<int64_t> kSizes = {1, 7, 0, 5000, 33};  // 5000 floats: larger than a chunk

// Tensor i of `rank`: exact in float (quarters), so sums are exact in any order...
float exact_value(int rank, size_t i, int64_t j) {
  return static_cast<float>((rank + 1) * 0.25 + static_cast<double>(j % 17) * 0.5 + static_cast<double>(i));
}
// ...and values whose sums round (the order shows in the last bits).
float rough_value(int rank, size_t i, int64_t j) {
  std::mt19937 rng(static_cast<uint32_t>(rank * 1000003 + i * 7919 + j));
  return std::uniform_real_distribution<float>(-1, 1)(rng);
}

std::vector<Tensor> make_tensors(int rank, float (*value)(int, size_t, int64_t)) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    Tensor t = Tensor::empty(DataType::kFloat32, Dims{kSizes[i]}).value();
    for (int64_t j = 0; j < kSizes[i]; ++j) t.data<float>()[j] = value(rank, i, j);
    tensors.push_back(t);
  }
  return tensors;
}

class DistWorld : public testing::TestWithParam<int> {};

TEST_P(DistWorld, AllReduceSumEqualsTheSerialSumOnEveryRank) {
  const int world = GetParam();
  std::vector<std::vector<Tensor>> exact(world), rough(world), single(world);
  run_world(world, [&](int rank, Communicator& comm) {
    exact[rank] = make_tensors(rank, exact_value);
    rough[rank] = make_tensors(rank, rough_value);
    single[rank] = {make_tensors(rank, rough_value)[3]};
    EXPECT_TRUE(comm.all_reduce_sum(exact[rank], cpu_stream()).is_ok());
    Status s = comm.all_reduce_sum(rough[rank], cpu_stream());
    EXPECT_TRUE(s.is_ok()) << s.message();
    s = comm.all_reduce_sum(single[rank], cpu_stream());
    EXPECT_TRUE(s.is_ok()) << s.message();
  });
  for (size_t i = 0; i < kSizes.size(); ++i) {
    for (int64_t j = 0; j < kSizes[i]; ++j) {
      double exact_sum = 0, rough_sum = 0;
      for (int r = 0; r < world; ++r) {
        exact_sum += exact_value(r, i, j);
        rough_sum += rough_value(r, i, j);
      }
      ASSERT_EQ(exact[0][i].data<float>()[j], static_cast<float>(exact_sum)) << "tensor " << i << " element " << j;
      ASSERT_NEAR(rough[0][i].data<float>()[j], rough_sum, 1e-5) << "tensor " << i << " element " << j;
      if (i == 3) {
        ASSERT_NEAR(single[0][0].data<float>()[j], rough_sum, 1e-5) << j;
      }
      for (int r = 1; r < world; ++r) {
        // Bit-identical on every rank.
        ASSERT_EQ(std::memcmp(&exact[r][i].data<float>()[j], &exact[0][i].data<float>()[j], 4), 0);
        ASSERT_EQ(std::memcmp(&rough[r][i].data<float>()[j], &rough[0][i].data<float>()[j], 4), 0);
        if (i == 3) {
          ASSERT_EQ(std::memcmp(&single[r][0].data<float>()[j], &single[0][0].data<float>()[j], 4), 0);
        }
      }
    }
  }
}

TEST_P(DistWorld, BroadcastHostSumsAndBarrier) {
  const int world = GetParam();
  const int root = world - 1;
  std::vector<std::vector<Tensor>> got(world);
  std::vector<std::vector<double>> sums(world);
  run_world(world, [&](int rank, Communicator& comm) {
    Tensor a = Tensor::empty(DataType::kFloat32, Dims{3000}).value();
    Tensor b = Tensor::empty(DataType::kInt32, Dims{5}).value();
    Tensor empty = Tensor::empty(DataType::kFloat32, Dims{0}).value();
    for (int j = 0; j < 3000; ++j) a.data<float>()[j] = static_cast<float>(rank * 10000 + j);
    for (int j = 0; j < 5; ++j) b.data<int32_t>()[j] = rank * 100 + j;
    got[rank] = {a, empty, b};
    Status s = comm.broadcast(got[rank], root, cpu_stream());
    EXPECT_TRUE(s.is_ok()) << s.message();
    auto host = comm.all_reduce_host({static_cast<double>(rank), 1.0, 0.1});
    ASSERT_TRUE(host.is_ok()) << host.status().message();
    sums[rank] = *host;
    EXPECT_TRUE(comm.barrier().is_ok());
    EXPECT_TRUE(comm.synchronize(cpu_stream()).is_ok());
  });
  for (int r = 0; r < world; ++r) {
    for (int j = 0; j < 3000; ++j) ASSERT_EQ(got[r][0].data<float>()[j], static_cast<float>(root * 10000 + j));
    for (int j = 0; j < 5; ++j) ASSERT_EQ(got[r][2].data<int32_t>()[j], root * 100 + j);
    ASSERT_EQ(sums[r].size(), 3u);
    EXPECT_EQ(sums[r][0], world * (world - 1) / 2.0);
    EXPECT_EQ(sums[r][1], world);
    double tenths = 0;
    for (int k = 0; k < world; ++k) tenths += 0.1;  // rank order
    EXPECT_EQ(sums[r][2], tenths);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, DistWorld, testing::Values(1, 2, 3, 4));

bool contains(const Status& s, const std::string& part) { return s.message().find(part) != std::string::npos; }

TEST(Dist, ARankThatNeverComesIsAnErrorWithinTheTimeout) {
  const int port = free_port();
  auto start = std::chrono::steady_clock::now();
  auto comm = Communicator::create(config_for(0, 3, port, 0.4), Device::cpu());
  ASSERT_FALSE(comm.is_ok());
  EXPECT_TRUE(contains(comm.status(), "ranks 1, 2 did not connect")) << comm.status().message();
  // A rank whose master never comes.
  auto worker = Communicator::create(config_for(1, 2, free_port(), 0.4), Device::cpu());
  ASSERT_FALSE(worker.is_ok());
  EXPECT_TRUE(contains(worker.status(), "could not connect to rank 0")) << worker.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Dist, MismatchedSizeNamesTheRankAndTensorThenGoesOn) {
  run_world(2, [&](int rank, Communicator& comm) {
    std::vector<Tensor> tensors;
    for (int64_t n : {4, 4, 4, rank == 1 ? 4096 : 1024})
      tensors.push_back(Tensor::zeros(DataType::kFloat32, Dims{n}).value());
    Status s = comm.all_reduce_sum(tensors, cpu_stream());
    EXPECT_TRUE(contains(s, "rank 1 sent 4096 floats for tensor 3, rank 0 has 1024")) << s.message();
    // A different count of tensors, a wrong dtype, a different collective.
    std::vector<Tensor> fewer(tensors.begin(), tensors.begin() + (rank == 0 ? 2 : 3));
    s = comm.all_reduce_sum(fewer, cpu_stream());
    EXPECT_TRUE(contains(s, "rank 1 sent 3 tensors, rank 0 has 2")) << s.message();
    std::vector<Tensor> half = {Tensor::zeros(rank == 1 ? DataType::kFloat16 : DataType::kFloat32, Dims{4}).value()};
    s = comm.all_reduce_sum(half, cpu_stream());
    EXPECT_TRUE(contains(s, "rank 1: tensor 0 is float16")) << s.message();
    std::vector<Tensor> one = {Tensor::zeros(DataType::kFloat32, Dims{4}).value()};
    s = rank == 0 ? comm.barrier() : comm.all_reduce_sum(one, cpu_stream());
    EXPECT_TRUE(contains(s, "rank 1 called all_reduce_sum while rank 0 called barrier")) << s.message();
    // Still usable: the check happens before any data moves.
    std::vector<Tensor> ok = {Tensor::zeros(DataType::kFloat32, Dims{3}).value()};
    ok[0].data<float>()[0] = 1;
    s = comm.all_reduce_sum(ok, cpu_stream());
    EXPECT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(ok[0].data<float>()[0], 2.0f);
  });
}

TEST(Dist, APeerThatClosesIsAnErrorNamingIt) {
  run_world(3, [&](int rank, Communicator& comm) {
    if (rank == 2) return;  // its communicator is destroyed: its sockets close
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Status s = comm.barrier();
    EXPECT_TRUE(contains(s, "rank 2 closed the connection")) << s.message();
    s = comm.barrier();
    EXPECT_TRUE(contains(s, "stopped after an earlier error")) << s.message();
  });
}

// A peer that agrees to a collective, then goes silent (timeout) or away (closed) before sending its data.
TEST(Dist, APeerLostInTheMiddleOfATransferIsAnErrorNamingIt) {
  for (bool closes : {false, true}) {
    const int port = free_port();
    Status s0;
    std::vector<float> data(10000, 1.0f);
    dist::Call call;
    call.op = dist::Op::kAllReduce;
    call.dtypes = {DataType::kFloat32};
    call.counts = {data.size()};
    std::thread t1([&] {
      auto group = dist::TcpGroup::connect(config_for(1, 2, port, 1.0));
      ASSERT_TRUE(group.is_ok()) << group.status().message();
      ASSERT_TRUE((*group)->agree(call).is_ok());
      if (!closes) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    });
    auto group = dist::TcpGroup::connect(config_for(0, 2, port, 1.0));
    ASSERT_TRUE(group.is_ok()) << group.status().message();
    ASSERT_TRUE((*group)->agree(call).is_ok());
    s0 = (*group)->ring_all_reduce(data.data(), data.size());
    t1.join();
    const std::string expected = closes ? "rank 1 closed the connection" : "timed out waiting for rank 1";
    EXPECT_TRUE(contains(s0, expected)) << s0.message();
    Status again = (*group)->ring_all_reduce(data.data(), data.size());
    EXPECT_TRUE(contains(again, "stopped after an earlier error")) << again.message();
  }
}

size_t open_descriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(Dist, SocketsAreClosedWithTheCommunicator) {
  const size_t before = open_descriptors();
  run_world(3, [&](int rank, Communicator& comm) {
    std::vector<Tensor> t = make_tensors(rank, exact_value);
    EXPECT_TRUE(comm.all_reduce_sum(t, cpu_stream()).is_ok());
  });
  auto failed = Communicator::create(config_for(0, 2, free_port(), 0.2), Device::cpu());
  EXPECT_FALSE(failed.is_ok());
  EXPECT_EQ(open_descriptors(), before);
}

TEST(Dist, CudaWithoutAGpuOrNcclIsAClearError) {
  if (cuda::gpu_available() && nccl_built_in()) GTEST_SKIP() << "skipped: this machine can run NCCL";
  auto comm = Communicator::create(config_for(0, 2, free_port(), 0.2), Device::cuda(0));
  ASSERT_FALSE(comm.is_ok());
  if (!nccl_built_in()) {
    EXPECT_TRUE(contains(comm.status(), "built without it")) << comm.status().message();
  }
}

TEST(Dist, WorldSizesThatDisagreeAreRefused) {
  const int port = free_port();
  Status s0, s1;
  std::thread t0([&] { s0 = Communicator::create(config_for(0, 2, port, 5), Device::cpu()).take_status(); });
  std::thread t1([&] { s1 = Communicator::create(config_for(1, 3, port, 5), Device::cpu()).take_status(); });
  t0.join();
  t1.join();
  EXPECT_TRUE(contains(s0, "rank 1 was started with world size 3, rank 0 with 2")) << s0.message();
  EXPECT_TRUE(contains(s1, "rank 0 refused the job")) << s1.message();
}

TEST(Dist, WrongDeviceAndRootAreRefusedOnEveryRank) {
  run_world(2, [&](int rank, Communicator& comm) {
    std::vector<Tensor> t = {Tensor::zeros(DataType::kFloat32, Dims{2}).value()};
    Status s = comm.broadcast(t, 5, cpu_stream());
    EXPECT_TRUE(contains(s, "the root rank 5 is outside 0..1")) << s.message();
    float fake = 0;
    std::vector<Tensor> gpu = {Tensor::view(&fake, DataType::kFloat32, Dims{1}, Device::cuda(0))};
    s = comm.all_reduce_sum(rank == 0 ? gpu : t, cpu_stream());
    EXPECT_TRUE(contains(s, "rank 0: tensor 0 is on cuda:0")) << s.message();
  });
}

// Two real processes: this test starts the binary twice with a filter that picks DistProcess.Worker.
TEST(DistProcess, Worker) {
  const char* mode = std::getenv("KILN_DIST_TEST_WORKER");
  if (!mode) GTEST_SKIP() << "run by DistProcess.TwoProcesses";
  auto config = dist_config_from_env();
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  config->chunk_bytes = 4096;
  auto comm = Communicator::create(*config, Device::cpu());
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  const int rank = (*comm)->rank(), world = (*comm)->world_size();
  std::vector<Tensor> tensors = make_tensors(rank, exact_value);
  Status s = (*comm)->all_reduce_sum(tensors, cpu_stream());
  ASSERT_TRUE(s.is_ok()) << s.message();
  for (size_t i = 0; i < kSizes.size(); ++i)
    for (int64_t j = 0; j < kSizes[i]; ++j) {
      double sum = 0;
      for (int r = 0; r < world; ++r) sum += exact_value(r, i, j);
      ASSERT_EQ(tensors[i].data<float>()[j], static_cast<float>(sum));
    }
  auto host = (*comm)->all_reduce_host({1.0});
  ASSERT_TRUE(host.is_ok()) << host.status().message();
  EXPECT_EQ((*host)[0], world);
  EXPECT_TRUE((*comm)->barrier().is_ok());
}

TEST(DistProcess, TwoProcesses) {
  char self[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(len, 0);
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> env = {"KILN_DIST_TEST_WORKER=1", "KILN_RANK=" + std::to_string(rank),
                                    "KILN_WORLD_SIZE=2",       "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + port,     "KILN_DIST_TIMEOUT=20"};
    for (char** e = environ; *e; ++e) {
      const std::string var = *e;
      // The child's distributed settings are only the ones above.
      if (var.rfind("KILN_", 0) == 0 || var.rfind("RANK=", 0) == 0 || var.rfind("WORLD_SIZE=", 0) == 0 ||
          var.rfind("OMPI_", 0) == 0 || var.rfind("LOCAL_RANK=", 0) == 0 || var.rfind("MASTER_", 0) == 0)
        continue;
      env.push_back(var);
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string filter = "--gtest_filter=DistProcess.Worker", brief = "--gtest_brief=1";
    char* argv[] = {self, filter.data(), brief.data(), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, self, nullptr, nullptr, argv, envp.data()), 0);
    pids.push_back(pid);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (pid_t pid : pids) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "worker " << pid << " did not finish within 60 s";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker exit status " << status;
  }
}

// NCCL: two GPUs of this machine, one thread (and communicator) each. Run by the lead on a two-GPU machine.
TEST(DistNccl, TwoGpusAllReduceAndBroadcast) {
  const auto runtime = cuda::query_runtime();
  if (runtime.gpus.size() < 2) GTEST_SKIP() << "skipped: needs two GPUs (" << runtime.gpus.size() << " found)";
  if (!nccl_built_in()) GTEST_SKIP() << "skipped: this kiln was built without NCCL (set KILN_NCCL_ROOT)";
  const int port = free_port();
  const std::vector<int64_t> sizes = {1000, 0, 70000};
  std::vector<std::vector<float>> results(2);
  std::vector<float> half_results(2, 0), broadcast_results(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Communicator::create(config_for(r, 2, port, 60), Device::cuda(r));
      ASSERT_TRUE(comm.is_ok()) << comm.status().message();
      auto stream = create_stream(Device::cuda(r));
      ASSERT_TRUE(stream.is_ok()) << stream.status().message();
      std::vector<Tensor> host, dev;
      for (size_t i = 0; i < sizes.size(); ++i) {
        Tensor h = Tensor::empty(DataType::kFloat32, Dims{sizes[i]}).value();
        for (int64_t j = 0; j < sizes[i]; ++j) h.data<float>()[j] = exact_value(r, i, j);
        Tensor d = Tensor::empty(DataType::kFloat32, Dims{sizes[i]}, cuda::device_allocator(r)).value();
        if (sizes[i] > 0) {
          ASSERT_TRUE(cuda::copy(h, d).is_ok());
        }
        host.push_back(h);
        dev.push_back(d);
      }
      Tensor h16 = Tensor::empty(DataType::kFloat16, Dims{8}).value();
      for (int j = 0; j < 8; ++j) h16.set(j, r + j);
      Tensor d16 = Tensor::empty(DataType::kFloat16, Dims{8}, cuda::device_allocator(r)).value();
      ASSERT_TRUE(cuda::copy(h16, d16).is_ok());
      dev.push_back(d16);
      Status s = (*comm)->all_reduce_sum(dev, **stream);
      ASSERT_TRUE(s.is_ok()) << s.message();
      std::vector<Tensor> first = {dev[0]};
      s = (*comm)->broadcast(first, 1, **stream);
      ASSERT_TRUE(s.is_ok()) << s.message();
      s = (*comm)->synchronize(**stream);
      ASSERT_TRUE(s.is_ok()) << s.message();
      ASSERT_TRUE(cuda::copy(dev[2], host[2]).is_ok());
      ASSERT_TRUE(cuda::copy(d16, h16).is_ok());
      results[r].assign(host[2].data<float>(), host[2].data<float>() + sizes[2]);
      half_results[r] = static_cast<float>(h16.at(3));
      ASSERT_TRUE(cuda::copy(dev[0], host[0]).is_ok());
      broadcast_results[r] = host[0].data<float>()[5];
      auto sums = (*comm)->all_reduce_host({1.0});
      ASSERT_TRUE(sums.is_ok());
      EXPECT_EQ((*sums)[0], 2.0);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(results[r].size(), size_t(sizes[2]));
    for (int64_t j = 0; j < sizes[2]; ++j) ASSERT_EQ(results[r][j], exact_value(0, 2, j) + exact_value(1, 2, j)) << j;
    EXPECT_EQ(half_results[r], 0 + 3 + 1 + 3);
    EXPECT_EQ(broadcast_results[r], exact_value(0, 0, 5) + exact_value(1, 0, 5));
  }
}

// Not run by default: the ring's throughput over loopback (--gtest_also_run_disabled_tests).
TEST(Dist, DISABLED_RingThroughput) {
  for (int world : {2, 4}) {
    const int64_t n = int64_t{1} << 24;  // 64 MB of float32, about ResNet-50's gradients
    std::vector<double> seconds(world);
    const int port = free_port();
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        DistConfig c = config_for(r, world, port, 60);
        c.chunk_bytes = DistConfig().chunk_bytes;
        auto comm = Communicator::create(c, Device::cpu());
        ASSERT_TRUE(comm.is_ok()) << comm.status().message();
        std::vector<Tensor> t = {Tensor::zeros(DataType::kFloat32, Dims{n}).value()};
        auto start = std::chrono::steady_clock::now();
        ASSERT_TRUE((*comm)->all_reduce_sum(t, cpu_stream()).is_ok());
        seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    }
    for (auto& t : threads) t.join();
    printf("world %d: %.0f MB all-reduced in %.3f s (%.0f MB/s of tensor)\n", world, n * 4 / 1e6, seconds[0],
           n * 4 / 1e6 / seconds[0]);
  }
}

}  // namespace
}  // namespace kiln::train
