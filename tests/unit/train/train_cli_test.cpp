// `kiln train` end to end: a run killed with SIGKILL in the middle of an epoch and resumed gives the same
// per-step losses as a run that was never interrupted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

extern char** environ;

namespace {
namespace fs = std::filesystem;

const char* kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

pid_t spawn(const std::vector<std::string>& args, const std::string& log,
            const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env_text(extra_env);
  for (char** e = environ; *e; ++e) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (const std::string& e : env_text) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// step -> loss of the "step" lines; the number of "epoch" lines.
std::map<int64_t, double> step_losses(const fs::path& run, int* epochs = nullptr) {
  std::map<int64_t, double> out;
  std::ifstream f(run / "metrics.jsonl");
  int e = 0;
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j["type"] == "epoch") ++e;
    if (j["type"] == "step") out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  if (epochs) *epochs = e;
  return out;
}

TEST(TrainCli, ResumeAfterSigkillMidEpochRepeatsTheLosses) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path dir = fs::temp_directory_path() / ("kiln_resume_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> common = {KILN_BIN,
                                           "train",
                                           "--quiet",
                                           "--config",
                                           KILN_SOURCE_DIR "/examples/fashion_mnist.yaml",
                                           "trainer.epochs=3",
                                           "data.train_limit=1024",
                                           "data.val_limit=200",
                                           "trainer.log_every=1",
                                           "trainer.snapshot_steps=5",
                                           "model.width=8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  // 16 steps per epoch, 48 in all.
  pid_t a = spawn(with({"--run-dir", (dir / "a").string()}), (dir / "a.log").string());
  ASSERT_GT(a, 0);
  ASSERT_EQ(wait_for(a), 0) << slurp((dir / "a.log").string());
  int epochs_a = 0;
  const auto want = step_losses(dir / "a", &epochs_a);
  ASSERT_EQ(want.size(), 48u) << slurp((dir / "a.log").string());
  ASSERT_EQ(epochs_a, 3);

  pid_t b = spawn(with({"--run-dir", (dir / "b").string()}), (dir / "b.log").string());
  ASSERT_GT(b, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  int64_t seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto got = step_losses(dir / "b");
    seen = got.empty() ? 0 : got.rbegin()->first;
    if (seen >= 23) break;  // past the snapshot at step 20, inside epoch 2 (steps 17..32)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(b, SIGKILL);
  const int status = wait_for(b);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed (step " << seen << ")";
  ASSERT_LT(seen, 32) << "killed after epoch 2 ended; the test wants a kill inside an epoch";

  pid_t c = spawn({KILN_BIN, "train", "--quiet", "--resume", (dir / "b").string()}, (dir / "c.log").string());
  ASSERT_GT(c, 0);
  ASSERT_EQ(wait_for(c), 0) << slurp((dir / "c.log").string());
  EXPECT_NE(slurp((dir / "c.log").string()).find("resuming"), std::string::npos);
  int epochs_b = 0;
  const auto got = step_losses(dir / "b", &epochs_b);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [step, loss] : want) EXPECT_NEAR(got.at(step), loss, 1e-5 * (1 + std::abs(loss))) << "step " << step;
  fs::remove_all(dir);
}

// A port no one listens on now.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return 29500 + getpid() % 1000;
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(TrainCli, TwoProcessesDataParallelFollowOneProcessWithTheSameGlobalBatch) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path dir = fs::temp_directory_path() / ("kiln_dp_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> common = {KILN_BIN,
                                           "train",
                                           "--quiet",
                                           "--config",
                                           KILN_SOURCE_DIR "/examples/fashion_mnist.yaml",
                                           "trainer.epochs=1",
                                           "data.train_limit=640",
                                           "data.val_limit=100",
                                           "trainer.log_every=1",
                                           "trainer.threads=1",
                                           "model.width=8"};
  auto with = [&](const std::string& run) {
    std::vector<std::string> a = common;
    a.insert(a.end(), {"--run-dir", (dir / run).string()});
    return a;
  };
  pid_t one = spawn(with("one"), (dir / "one.log").string());
  ASSERT_GT(one, 0);
  ASSERT_EQ(wait_for(one), 0) << slurp((dir / "one.log").string());
  const auto want = step_losses(dir / "one");
  ASSERT_EQ(want.size(), 10u);
  // Launched as a cluster launcher does (RANK, WORLD_SIZE, ...), then as `mpirun -np 2` does (Open MPI's
  // OMPI_COMM_WORLD_* variables; MASTER_ADDR defaults to this machine).
  for (const std::string launch : {"env", "mpirun"}) {
    SCOPED_TRACE(launch);
    const std::string port = "MASTER_PORT=" + std::to_string(free_port());
    std::vector<pid_t> ranks;
    for (int r = 0; r < 2; ++r) {
      const std::string log = (dir / (launch + std::to_string(r) + ".log")).string();
      const std::string rank = std::to_string(r);
      const std::vector<std::string> env =
          launch == "env"
              ? std::vector<std::string>{"RANK=" + rank, "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1", port}
              : std::vector<std::string>{"OMPI_COMM_WORLD_RANK=" + rank, "OMPI_COMM_WORLD_SIZE=2",
                                         "OMPI_COMM_WORLD_LOCAL_RANK=" + rank, port};
      ranks.push_back(spawn(with(launch), log, env));
      ASSERT_GT(ranks.back(), 0);
    }
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(wait_for(ranks[r]), 0) << slurp((dir / (launch + std::to_string(r) + ".log")).string());
    const auto got = step_losses(dir / launch);
    ASSERT_EQ(got.size(), want.size()) << slurp((dir / (launch + "0.log")).string());
    // The same samples per step and the mean of the halves' gradients: the same curve up to summation order.
    for (const auto& [step, loss] : want)
      EXPECT_NEAR(got.at(step), loss, 2e-4 * (1 + std::abs(loss))) << "step " << step;
    EXPECT_NE(slurp((dir / (launch + "0.log")).string()).find("data parallel over 2 processes"), std::string::npos);
  }
  fs::remove_all(dir);
}

}  // namespace
