// Tests of launcher detection (bootstrap/launcher_env.h) over fake environments: each
// launcher, the rendezvous precedence, local rank and size, every malformed value, and
// Slurm hostlists.
#include "bootstrap/launcher_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace tessera {
namespace {

using EnvMap = std::map<std::string, std::string>;

EnvLookup Lookup(const EnvMap& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

LaunchInfo Detect(const EnvMap& env, const std::string& bootstrap_addr = "") {
  LaunchInfo info;
  Status s = DetectLaunch(Lookup(env), bootstrap_addr, &info);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return info;
}

const EnvMap kOpenMpi = {
    {"OMPI_COMM_WORLD_RANK", "2"},       {"OMPI_COMM_WORLD_SIZE", "4"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
    {"OMPI_MCA_ess_base_jobid", "77"},
};
const EnvMap kPmix = {{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "prterun-host-123@1"}};
const EnvMap kSlurm = {
    {"SLURM_PROCID", "5"},
    {"SLURM_NTASKS", "7"},
    {"SLURM_LOCALID", "1"},
    {"SLURM_NODEID", "2"},
    {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
    {"SLURM_JOB_ID", "123456"},
    {"SLURM_STEP_ID", "2"},
    {"SLURM_STEP_NODELIST", "gpu[07-09],cpu1"},
    {"SLURM_JOB_NODELIST", "gpu[01-09],cpu1"},
};
const EnvMap kTorchrun = {
    {"RANK", "3"},
    {"WORLD_SIZE", "8"},
    {"LOCAL_RANK", "3"},
    {"LOCAL_WORLD_SIZE", "4"},
    {"MASTER_ADDR", "10.0.0.1"},
    {"MASTER_PORT", "29500"},
};

EnvMap Merge(std::vector<EnvMap> parts) {
  EnvMap all;
  for (const EnvMap& part : parts) {
    for (const auto& kv : part) all[kv.first] = kv.second;
  }
  return all;
}

TEST(DetectLaunchTest, NothingSetIsASingleProcess) {
  LaunchInfo info = Detect({});
  EXPECT_EQ(info.launcher, Launcher::kNone);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 1);
  EXPECT_EQ(info.root_host, "");
  EXPECT_EQ(info.root_port, 0);
  EXPECT_FALSE(info.use_pmix);
  EXPECT_EQ(info.job_key, "");
}

TEST(DetectLaunchTest, EmptyValuesCountAsUnset) {
  LaunchInfo info = Detect({{"OMPI_COMM_WORLD_RANK", ""}, {"RANK", ""}, {"MASTER_ADDR", ""}});
  EXPECT_EQ(info.launcher, Launcher::kNone);
}

TEST(DetectLaunchTest, OpenMpiWithPmix) {
  LaunchInfo info = Detect(Merge({kOpenMpi, kPmix}));
  EXPECT_EQ(info.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 2);
  EXPECT_TRUE(info.use_pmix);
  EXPECT_EQ(info.root_host, "");
  EXPECT_EQ(info.root_port, 0);
  EXPECT_EQ(info.job_key, "openmpi:prterun-host-123@1");
}

TEST(DetectLaunchTest, OpenMpiWithoutPmixNamesNoRendezvous) {
  LaunchInfo info = Detect(kOpenMpi);
  EXPECT_EQ(info.launcher, Launcher::kOpenMpi);
  EXPECT_FALSE(info.use_pmix);
  EXPECT_EQ(info.root_host, "");
  EXPECT_EQ(info.job_key, "openmpi:77");
  // Only one of the two PMIx variables is not enough.
  EXPECT_FALSE(Detect(Merge({kOpenMpi, {{"PMIX_RANK", "2"}}})).use_pmix);
}

TEST(DetectLaunchTest, OpenMpiWithoutLocalValuesKeepsDefaults) {
  LaunchInfo info = Detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 1);
}

TEST(DetectLaunchTest, SlurmWithPmix) {
  LaunchInfo info =
      Detect(Merge({kSlurm, {{"PMIX_RANK", "5"}, {"PMIX_NAMESPACE", "slurm.pmix.123456.2"}}}));
  EXPECT_EQ(info.launcher, Launcher::kSlurm);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.size, 7);
  EXPECT_TRUE(info.use_pmix);
  EXPECT_EQ(info.root_host, "");
  EXPECT_EQ(info.job_key, "slurm:123456.2");
}

TEST(DetectLaunchTest, SlurmWithoutPmixDerivesHostAndPort) {
  LaunchInfo info = Detect(kSlurm);
  EXPECT_EQ(info.launcher, Launcher::kSlurm);
  EXPECT_FALSE(info.use_pmix);
  EXPECT_EQ(info.root_host, "gpu07");
  // 20000 + (97 * 123456 + 2) % 10000 = 20000 + (3456 * 97 + 2) % 10000 = 25234.
  EXPECT_EQ(info.root_port, 25234);
  EXPECT_EQ(info.job_key, "slurm:123456.2");
}

TEST(DetectLaunchTest, SlurmPortsDifferAcrossStepsAndJobs) {
  EnvMap next_step = kSlurm, next_job = kSlurm;
  next_step["SLURM_STEP_ID"] = "3";
  next_job["SLURM_JOB_ID"] = "123457";
  int port = Detect(kSlurm).root_port;
  int step_port = Detect(next_step).root_port;
  int job_port = Detect(next_job).root_port;
  EXPECT_NE(port, step_port);
  EXPECT_NE(port, job_port);
  EXPECT_NE(step_port, job_port);
  for (int p : {port, step_port, job_port}) {
    EXPECT_GE(p, kSlurmPortBase);
    EXPECT_LT(p, kSlurmPortBase + kSlurmPortSpan);
  }
}

TEST(DetectLaunchTest, SlurmFallsBackToJobNodelistAndLegacyJobId) {
  EnvMap env = kSlurm;
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_JOB_ID");
  env["SLURM_JOBID"] = "123456";
  LaunchInfo info = Detect(env);
  EXPECT_EQ(info.root_host, "gpu01");
  EXPECT_EQ(info.root_port, 25234);
}

TEST(DetectLaunchTest, SlurmWithoutNodelistNamesNoRendezvous) {
  EnvMap env = kSlurm;
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_JOB_NODELIST");
  LaunchInfo info = Detect(env);
  EXPECT_EQ(info.root_host, "");
  EXPECT_EQ(info.root_port, 0);
}

TEST(DetectLaunchTest, SlurmLocalSizeFromTasksPerNode) {
  // "2(x3),1": nodes 0-2 run two tasks, node 3 runs one.
  EnvMap env = kSlurm;
  EXPECT_EQ(Detect(env).local_size, 2);
  EXPECT_EQ(Detect(env).local_rank, 1);
  env["SLURM_NODEID"] = "3";
  env["SLURM_LOCALID"] = "0";
  EXPECT_EQ(Detect(env).local_size, 1);
  // The step's list wins over the job's.
  env["SLURM_TASKS_PER_NODE"] = "4(x4)";
  EXPECT_EQ(Detect(env).local_size, 1);
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_EQ(Detect(env).local_size, 4);
  // Without a list, SLURM_NTASKS_PER_NODE.
  env.erase("SLURM_TASKS_PER_NODE");
  env["SLURM_NTASKS_PER_NODE"] = "3";
  EXPECT_EQ(Detect(env).local_size, 3);
}

TEST(DetectLaunchTest, SlurmStepTaskCountWinsOverJobTaskCount) {
  EnvMap env = kSlurm;
  env["SLURM_STEP_NUM_TASKS"] = "6";
  EXPECT_EQ(Detect(env).size, 6);
}

TEST(DetectLaunchTest, SlurmBatchScriptIsNotALaunch) {
  // sbatch's script has SLURM_PROCID=0 and SLURM_NTASKS but no step.
  EnvMap env = kSlurm;
  env.erase("SLURM_STEP_ID");
  env["SLURM_PROCID"] = "0";
  LaunchInfo info = Detect(env);
  EXPECT_EQ(info.launcher, Launcher::kNone);
  EXPECT_EQ(info.size, 1);
}

TEST(DetectLaunchTest, Torchrun) {
  LaunchInfo info = Detect(kTorchrun);
  EXPECT_EQ(info.launcher, Launcher::kTorchrun);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.local_rank, 3);
  EXPECT_EQ(info.local_size, 4);
  EXPECT_EQ(info.root_host, "10.0.0.1");
  EXPECT_EQ(info.root_port, 29500);
  EXPECT_FALSE(info.use_pmix);
  EXPECT_EQ(info.job_key, "torchrun:10.0.0.1:29500");
}

TEST(DetectLaunchTest, TorchrunJobKeyIsTheRunId) {
  EXPECT_EQ(Detect(Merge({kTorchrun, {{"TORCHELASTIC_RUN_ID", "job-42"}}})).job_key,
            "torchrun:job-42");
  // torchrun's default run id "none" says nothing.
  EXPECT_EQ(Detect(Merge({kTorchrun, {{"TORCHELASTIC_RUN_ID", "none"}}})).job_key,
            "torchrun:10.0.0.1:29500");
}

TEST(DetectLaunchTest, MasterAddrMayBeIpv6) {
  EnvMap env = kTorchrun;
  env["MASTER_ADDR"] = "[fe80::1%eth0]";
  EXPECT_EQ(Detect(env).root_host, "fe80::1%eth0");
  env["MASTER_ADDR"] = "::1";
  EXPECT_EQ(Detect(env).root_host, "::1");
}

TEST(DetectLaunchTest, OpenMpiWinsOverSlurmAndTorchrun) {
  LaunchInfo info = Detect(Merge({kSlurm, kTorchrun, kOpenMpi}));
  EXPECT_EQ(info.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
}

TEST(DetectLaunchTest, SlurmWinsOverHandSetRank) {
  LaunchInfo info = Detect(Merge({kTorchrun, kSlurm}));
  EXPECT_EQ(info.launcher, Launcher::kSlurm);
  EXPECT_EQ(info.rank, 5);
  // MASTER_ADDR/PORT still name the rendezvous under Slurm.
  EXPECT_EQ(info.root_host, "10.0.0.1");
  EXPECT_EQ(info.root_port, 29500);
}

TEST(DetectLaunchTest, TorchrunUnderSrunWinsOverSlurm) {
  // srun torchrun: one srun task per node, so SLURM_PROCID numbers nodes.
  LaunchInfo info = Detect(Merge({kSlurm, kTorchrun, {{"TORCHELASTIC_RUN_ID", "r1"}}}));
  EXPECT_EQ(info.launcher, Launcher::kTorchrun);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 8);
}

TEST(DetectLaunchTest, RendezvousPrecedence) {
  const EnvMap master = {{"MASTER_ADDR", "master-host"}, {"MASTER_PORT", "1234"}};
  const EnvMap slurm_pmix = Merge({kSlurm, {{"PMIX_RANK", "5"}, {"PMIX_NAMESPACE", "ns"}}});
  // TESSERA_BOOTSTRAP_ADDR over everything.
  LaunchInfo info = Detect(Merge({slurm_pmix, master}), "boot-host:4321");
  EXPECT_EQ(info.root_host, "boot-host");
  EXPECT_EQ(info.root_port, 4321);
  EXPECT_FALSE(info.use_pmix);
  // MASTER_ADDR/PORT over PMIx and Slurm's nodelist.
  info = Detect(Merge({slurm_pmix, master}));
  EXPECT_EQ(info.root_host, "master-host");
  EXPECT_EQ(info.root_port, 1234);
  EXPECT_FALSE(info.use_pmix);
  // PMIx over Slurm's nodelist.
  info = Detect(slurm_pmix);
  EXPECT_TRUE(info.use_pmix);
  EXPECT_EQ(info.root_host, "");
  // Slurm's nodelist last.
  info = Detect(kSlurm);
  EXPECT_EQ(info.root_host, "gpu07");
  // The bootstrap address works with no launcher at all, and with brackets for IPv6.
  info = Detect({}, "[::1]:29400");
  EXPECT_EQ(info.launcher, Launcher::kNone);
  EXPECT_EQ(info.root_host, "::1");
  EXPECT_EQ(info.root_port, 29400);
}

TEST(DetectLaunchTest, NullLookupReadsTheProcessEnvironment) {
  ASSERT_EQ(setenv("RANK", "1", 1), 0);
  ASSERT_EQ(setenv("WORLD_SIZE", "3", 1), 0);
  LaunchInfo info;
  Status s = DetectLaunch(nullptr, "", &info);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.launcher, Launcher::kTorchrun);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.size, 3);
}

struct BadCase {
  const char* what;
  EnvMap env;
  std::string bootstrap_addr;
  std::string must_mention;  // the variable and its value, as the message quotes them
};

EnvMap With(EnvMap base, const EnvMap& changes, const std::vector<std::string>& removed = {}) {
  for (const auto& kv : changes) base[kv.first] = kv.second;
  for (const std::string& name : removed) base.erase(name);
  return base;
}

TEST(DetectLaunchTest, EveryMalformedValueIsInvalidArgumentNamingIt) {
  const EnvMap ompi_pmix = Merge({kOpenMpi, kPmix});
  const std::vector<BadCase> cases = {
      {"rank not a number", With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "two"}}), "",
       "OMPI_COMM_WORLD_RANK='two'"},
      {"rank negative", With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "-1"}}), "",
       "OMPI_COMM_WORLD_RANK='-1'"},
      {"rank with sign", With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "+1"}}), "",
       "OMPI_COMM_WORLD_RANK='+1'"},
      {"rank with space", With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "1 "}}), "",
       "OMPI_COMM_WORLD_RANK='1 '"},
      {"rank hex", With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "0x1"}}), "",
       "OMPI_COMM_WORLD_RANK='0x1'"},
      {"rank overflows int", With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "4294967296"}}), "",
       "OMPI_COMM_WORLD_RANK='4294967296'"},
      {"rank overflows uint64",
       With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "99999999999999999999999"}}), "",
       "OMPI_COMM_WORLD_RANK='99999999999999999999999'"},
      {"rank == size", With(kOpenMpi, {{"OMPI_COMM_WORLD_RANK", "4"}}), "",
       "OMPI_COMM_WORLD_RANK='4' is not below OMPI_COMM_WORLD_SIZE='4'"},
      {"size zero", With(kOpenMpi, {{"OMPI_COMM_WORLD_SIZE", "0"}}), "",
       "OMPI_COMM_WORLD_SIZE='0'"},
      {"size missing", With(kOpenMpi, {}, {"OMPI_COMM_WORLD_SIZE"}), "", "OMPI_COMM_WORLD_SIZE"},
      {"local rank == local size", With(kOpenMpi, {{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}), "",
       "OMPI_COMM_WORLD_LOCAL_RANK='2'"},
      {"local rank not a number", With(kOpenMpi, {{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}}), "",
       "OMPI_COMM_WORLD_LOCAL_RANK='x'"},
      {"local size above size", With(kOpenMpi, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}), "",
       "OMPI_COMM_WORLD_LOCAL_SIZE='8'"},
      {"local size zero", With(kOpenMpi, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "0"}}), "",
       "OMPI_COMM_WORLD_LOCAL_SIZE='0'"},
      {"local rank without local size", With(kOpenMpi, {}, {"OMPI_COMM_WORLD_LOCAL_SIZE"}), "",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"local size without local rank", With(kOpenMpi, {}, {"OMPI_COMM_WORLD_LOCAL_RANK"}), "",
       "OMPI_COMM_WORLD_LOCAL_SIZE='2'"},
      {"PMIX_RANK not a number", With(ompi_pmix, {{"PMIX_RANK", "r2"}}), "", "PMIX_RANK='r2'"},
      {"PMIX_RANK differs", With(ompi_pmix, {{"PMIX_RANK", "3"}}), "", "PMIX_RANK='3'"},
      {"MASTER_PORT zero", With(kTorchrun, {{"MASTER_PORT", "0"}}), "", "MASTER_PORT='0'"},
      {"MASTER_PORT too big", With(kTorchrun, {{"MASTER_PORT", "65536"}}), "",
       "MASTER_PORT='65536'"},
      {"MASTER_PORT a name", With(kTorchrun, {{"MASTER_PORT", "http"}}), "", "MASTER_PORT='http'"},
      {"MASTER_PORT alone", With(kTorchrun, {}, {"MASTER_ADDR"}), "", "MASTER_ADDR"},
      {"MASTER_ADDR alone", With(kTorchrun, {}, {"MASTER_PORT"}), "", "MASTER_PORT"},
      {"MASTER_ADDR with space", With(kTorchrun, {{"MASTER_ADDR", "my host"}}), "",
       "MASTER_ADDR='my host'"},
      {"MASTER_ADDR with slash", With(kTorchrun, {{"MASTER_ADDR", "http://h"}}), "",
       "MASTER_ADDR='http://h'"},
      {"MASTER_* bad even when overridden", With(kTorchrun, {{"MASTER_PORT", "x"}}), "h:1",
       "MASTER_PORT='x'"},
      {"WORLD_SIZE not a number", With(kTorchrun, {{"WORLD_SIZE", "eight"}}), "",
       "WORLD_SIZE='eight'"},
      {"WORLD_SIZE missing", With(kTorchrun, {}, {"WORLD_SIZE"}), "", "WORLD_SIZE"},
      {"RANK == WORLD_SIZE", With(kTorchrun, {{"RANK", "8"}}), "", "RANK='8'"},
      {"LOCAL_WORLD_SIZE zero", With(kTorchrun, {{"LOCAL_WORLD_SIZE", "0"}}), "",
       "LOCAL_WORLD_SIZE='0'"},
      {"LOCAL_RANK negative", With(kTorchrun, {{"LOCAL_RANK", "-3"}}), "", "LOCAL_RANK='-3'"},
      {"bootstrap without port", {}, "host", "TESSERA_BOOTSTRAP_ADDR='host'"},
      {"bootstrap empty port", {}, "host:", "TESSERA_BOOTSTRAP_ADDR='host:'"},
      {"bootstrap empty host", {}, ":29500", "TESSERA_BOOTSTRAP_ADDR=':29500'"},
      {"bootstrap port too big", {}, "host:99999", "TESSERA_BOOTSTRAP_ADDR='host:99999'"},
      {"bootstrap port zero", {}, "host:0", "TESSERA_BOOTSTRAP_ADDR='host:0'"},
      {"bootstrap bare ipv6", {}, "::1:80", "TESSERA_BOOTSTRAP_ADDR='::1:80'"},
      {"bootstrap bracket no colon", {}, "[::1]80", "TESSERA_BOOTSTRAP_ADDR='[::1]80'"},
      {"bootstrap bracket unclosed", {}, "[::1:80", "TESSERA_BOOTSTRAP_ADDR='[::1:80'"},
      {"bootstrap host with space", {}, "a b:1", "TESSERA_BOOTSTRAP_ADDR='a b:1'"},
      {"SLURM_NTASKS zero", With(kSlurm, {{"SLURM_NTASKS", "0"}}), "", "SLURM_NTASKS='0'"},
      {"SLURM_PROCID >= SLURM_NTASKS", With(kSlurm, {{"SLURM_PROCID", "7"}}), "",
       "SLURM_PROCID='7'"},
      {"SLURM_LOCALID too big", With(kSlurm, {{"SLURM_LOCALID", "2"}}), "", "SLURM_LOCALID='2'"},
      {"tasks per node malformed", With(kSlurm, {{"SLURM_STEP_TASKS_PER_NODE", "2(x3"}}), "",
       "SLURM_STEP_TASKS_PER_NODE='2(x3'"},
      {"tasks per node zero", With(kSlurm, {{"SLURM_STEP_TASKS_PER_NODE", "0,2"}}), "",
       "SLURM_STEP_TASKS_PER_NODE='0,2'"},
      {"tasks per node trailing comma", With(kSlurm, {{"SLURM_STEP_TASKS_PER_NODE", "2,"}}), "",
       "SLURM_STEP_TASKS_PER_NODE='2,'"},
      {"SLURM_NODEID beyond the list", With(kSlurm, {{"SLURM_NODEID", "4"}}), "",
       "SLURM_STEP_TASKS_PER_NODE='2(x3),1'"},
      {"SLURM_NODEID not a number", With(kSlurm, {{"SLURM_NODEID", "n2"}}), "",
       "SLURM_NODEID='n2'"},
      {"SLURM_NTASKS_PER_NODE not a number",
       With(kSlurm, {{"SLURM_NTASKS_PER_NODE", "four"}}, {"SLURM_STEP_TASKS_PER_NODE"}), "",
       "SLURM_NTASKS_PER_NODE='four'"},
      {"SLURM_JOB_ID not a number", With(kSlurm, {{"SLURM_JOB_ID", "12a"}}), "",
       "SLURM_JOB_ID='12a'"},
      {"SLURM_STEP_ID not a number", With(kSlurm, {{"SLURM_STEP_ID", "batch"}}), "",
       "SLURM_STEP_ID='batch'"},
      {"nodelist malformed", With(kSlurm, {{"SLURM_STEP_NODELIST", "gpu[07-"}}), "",
       "SLURM_STEP_NODELIST: malformed Slurm hostlist 'gpu[07-'"},
      {"nodelist without job id", With(kSlurm, {}, {"SLURM_JOB_ID"}), "", "SLURM_JOB_ID"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    LaunchInfo info;
    info.rank = -42;  // sentinel: must stay untouched on error
    Status s = DetectLaunch(Lookup(c.env), c.bootstrap_addr, &info);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(c.must_mention), std::string::npos)
        << "message: " << s.message() << "\nexpected to mention: " << c.must_mention;
    EXPECT_EQ(info.rank, -42);
  }
}

TEST(ParseHostPortTest, AcceptsNamesIpv4AndBracketedIpv6) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(ParseHostPort("X", "node-1.cluster:29500", &host, &port).ok());
  EXPECT_EQ(host, "node-1.cluster");
  EXPECT_EQ(port, 29500);
  ASSERT_TRUE(ParseHostPort("X", "127.0.0.1:1", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 1);
  ASSERT_TRUE(ParseHostPort("X", "[fe80::1]:65535", &host, &port).ok());
  EXPECT_EQ(host, "fe80::1");
  EXPECT_EQ(port, 65535);
}

struct HostListCase {
  std::string list;
  std::string first;
};

TEST(FirstSlurmHostTest, ValidLists) {
  const std::vector<HostListCase> cases = {
      {"n1", "n1"},
      {"n[1-3]", "n1"},
      {"n[07-09,12]", "n07"},
      {"node[07-09,12],gpu[1-2]", "node07"},
      {"a[1-2],b3", "a1"},
      {"b3,a[1-2]", "b3"},
      {"rack1-n[001-004]", "rack1-n001"},
      {"n[5]", "n5"},
      {"n[12,3-4]", "n12"},
      {"n[1-2]-ib", "n1-ib"},
      {"rack[2-3]-n[08-09]", "rack2-n08"},
      {"host.domain.org", "host.domain.org"},
      {"my_node", "my_node"},
  };
  for (const HostListCase& c : cases) {
    std::string first;
    Status s = FirstSlurmHost(c.list, &first);
    EXPECT_TRUE(s.ok()) << c.list << ": " << s.ToString();
    EXPECT_EQ(first, c.first) << c.list;
  }
}

TEST(FirstSlurmHostTest, MalformedListsAreInvalidArgument) {
  const std::vector<std::string> cases = {
      "",      ",",       "n1,",     ",n1",     "n1,,n2",   "n[1-3",   "n1-3]",  "n[]",
      "n[1-]", "n[-3]",   "n[a-b]",  "n[3-1]",  "n[1-2-3]", "n[1,,2]", "n[[1]]", "[1-3]",
      "n 1",   "n[1 -2]", "n[1-2],", "n[1-2]]", "n/1",      "n[1,2",   "n[+1]",
  };
  for (const std::string& list : cases) {
    std::string first = "untouched";
    Status s = FirstSlurmHost(list, &first);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << list << "' gave " << s.ToString();
    EXPECT_NE(s.message().find("'" + list + "'"), std::string::npos) << s.message();
    EXPECT_EQ(first, "untouched") << list;
  }
}

TEST(LauncherNameTest, NamesEveryLauncher) {
  EXPECT_STREQ(LauncherName(Launcher::kNone), "none");
  EXPECT_STREQ(LauncherName(Launcher::kOpenMpi), "openmpi");
  EXPECT_STREQ(LauncherName(Launcher::kSlurm), "slurm");
  EXPECT_STREQ(LauncherName(Launcher::kTorchrun), "torchrun");
}

}  // namespace
}  // namespace tessera
