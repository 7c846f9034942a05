#include "base/settings.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <iterator>
#include <cstdlib>

namespace tessera {
namespace {

Status Parse(const char* env, const char* text, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    return InvalidArgument(std::string(env) + "='" + text + "' is not an integer");
  }
  *out = v;
  return Status::Ok();
}

Status Parse(const char*, const char* text, std::string* out) {
  *out = text;
  return Status::Ok();
}

std::string ToText(int64_t v) { return std::to_string(v); }
std::string ToText(const char* v) { return v; }
const std::string& ToText(const std::string& v) { return v; }

// InvalidArgument "<env> must be in [lo, hi]" unless lo <= v <= hi.
Status InRange(const char* env, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return InvalidArgument(std::string(env) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// The UCX, cuda_ipc and ibverbs rows, in the ranges their transports accept.
Status ValidateTransportTunables(const Settings& s) {
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_UCX_CHUNKS_IN_FLIGHT", s.ucx_chunks_in_flight, 1, 1024));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_CUDA_IPC_SLOTS", s.cuda_ipc_slots, 1, 64));
  if (s.ib_slots < 1 || s.ib_slots > 128 || (s.ib_slots & (s.ib_slots - 1)) != 0) {
    return InvalidArgument("TESSERA_IB_SLOTS must be a power of two in [1, 128]");
  }
  if (s.ib_slot_bytes < 4096 || s.ib_slot_bytes % 64 != 0 || s.ib_slot_bytes > (4 << 20)) {
    return InvalidArgument("TESSERA_IB_SLOT_BYTES must be a multiple of 64 in [4096, 4 MiB]");
  }
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_IB_TIMEOUT", s.ib_timeout, 1, 31));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_IB_RETRY_COUNT", s.ib_retry_count, 0, 7));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_IB_SL", s.ib_sl, 0, 15));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_IB_TC", s.ib_tc, 0, 255));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_IB_REGISTER_USER_BUFFERS", s.ib_register_user_buffers, 0, 1));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_IB_CACHE_ENTRIES", s.ib_cache_entries, 1, INT64_MAX));
  return InRange("TESSERA_IB_CACHE_BYTES", s.ib_cache_bytes, 1, INT64_MAX);
}

Status Validate(const Settings& s) {
  if (s.timeout_ms <= 0) return InvalidArgument("TESSERA_TIMEOUT_MS must be > 0");
  if (s.debug != "NONE" && s.debug != "WARN" && s.debug != "INFO") {
    return InvalidArgument("TESSERA_DEBUG must be NONE, WARN or INFO, not '" + s.debug + "'");
  }
  if (s.ucx_chunk_bytes < 4096 || s.ucx_chunk_bytes % 64 != 0 || s.ucx_chunk_bytes > (1 << 28)) {
    return InvalidArgument("TESSERA_UCX_CHUNK_BYTES must be a multiple of 64 in [4096, 256 MiB]");
  }
  if (s.flight_recorder < 0 || s.flight_recorder > 1000000) {
    return InvalidArgument("TESSERA_FLIGHT_RECORDER must be in [0, 1000000]");
  }
  if (s.dump_signal < 0 || s.dump_signal > 64) return InvalidArgument("TESSERA_DUMP_SIGNAL must be in [0, 64]");
  if (s.diagnosis_ms < 0 || s.diagnosis_ms > 60000) {
    return InvalidArgument("TESSERA_DIAGNOSIS_MS must be in [0, 60000]");
  }
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_STRAGGLER_WINDOW", s.straggler_window, 0, 1000000));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_STRAGGLER_SHARE", s.straggler_share, 1, 100));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_STRAGGLER_PERIOD_MS", s.straggler_period_ms, 10, 3600000));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_METRICS_PORT", s.metrics_port, 0, 65535));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_HALF_SEGMENT_BYTES", s.half_segment_bytes, 4096, int64_t{1} << 40));
  if (s.half_wire != "float32" && s.half_wire != "half") {
    return InvalidArgument("TESSERA_HALF_WIRE must be float32 or half, not '" + s.half_wire + "'");
  }
  if (s.ib_gid_index < -1 || s.ib_gid_index > 255) return InvalidArgument("TESSERA_IB_GID_INDEX must be in [-1, 255]");
  if (s.shm_slot_bytes < 256 || s.shm_slot_bytes % 64 != 0 || s.shm_slot_bytes > (1 << 26)) {
    return InvalidArgument("TESSERA_SHM_SLOT_BYTES must be a multiple of 64 in [256, 64 MiB]");
  }
  if (s.cuda_ipc_slot_bytes < 4096 || s.cuda_ipc_slot_bytes % 256 != 0 || s.cuda_ipc_slot_bytes > (1 << 28)) {
    return InvalidArgument("TESSERA_CUDA_IPC_SLOT_BYTES must be a multiple of 256 in [4096, 256 MiB]");
  }
  if (s.shm_slots < 2 || s.shm_slots > 1024) {
    return InvalidArgument("TESSERA_SHM_SLOTS must be in [2, 1024]");
  }
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_SHM_SEGMENT_BYTES", s.shm_segment_bytes, 1 << 20, int64_t{1} << 40));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_SHM_PREFAULT_BYTES", s.shm_prefault_bytes, 0, int64_t{1} << 40));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_SHM_SINGLE_COPY_BYTES", s.shm_single_copy_bytes, 0, int64_t{1} << 40));
  if (s.shm_board_bytes < 0 || s.shm_board_bytes % 64 != 0 || s.shm_board_bytes > (1 << 20)) {
    return InvalidArgument("TESSERA_SHM_BOARD_BYTES must be a multiple of 64 in [0, 1 MiB]");
  }
  if (s.tcp_streams < 1 || s.tcp_streams > 64) {
    return InvalidArgument("TESSERA_TCP_STREAMS must be in [1, 64]");
  }
  if (s.tcp_chunk_bytes < 4096 || s.tcp_chunk_bytes % 64 != 0 || s.tcp_chunk_bytes > (1 << 28)) {
    return InvalidArgument("TESSERA_TCP_CHUNK_BYTES must be a multiple of 64 in [4096, 256 MiB]");
  }
  if (s.tcp_congestion.empty() || s.tcp_congestion.size() > 15 ||
      s.tcp_congestion.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    return InvalidArgument("TESSERA_TCP_CONGESTION must be a congestion control name (e.g. cubic, bbr, reno) or "
                           "system, not '" + s.tcp_congestion + "'");
  }
  TESSERA_RETURN_IF_ERROR(ValidateTransportTunables(s));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_SPIN_US", s.spin_us, 0, 10000000));
  if (s.poll != "auto" && s.poll != "yield" && s.poll != "pause") {
    return InvalidArgument("TESSERA_POLL must be auto, yield or pause, not '" + s.poll + "'");
  }
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_BOOTSTRAP_FANOUT", s.bootstrap_fanout, 1, 1 << 20));
  TESSERA_RETURN_IF_ERROR(InRange("TESSERA_AUTOTUNE_TURN_CALLS", s.autotune_turn_calls, 2, 4096));
  if (s.probe < 0 || s.probe > 2) return InvalidArgument("TESSERA_PROBE must be 0, 1 or 2");
  if (s.check_calls < 0 || s.check_calls > 1) return InvalidArgument("TESSERA_CHECK_CALLS must be 0 or 1");
  if (s.deterministic < 0 || s.deterministic > 1) return InvalidArgument("TESSERA_DETERMINISTIC must be 0 or 1");
  if (s.deterministic_segment_bytes < 64 || s.deterministic_segment_bytes > (int64_t{1} << 30)) {
    return InvalidArgument("TESSERA_DETERMINISTIC_SEGMENT_BYTES must be in [64, 1 GiB]");
  }
  const std::string& plan = s.deterministic_plan;
  if (plan != "auto" && plan != "keyed" && plan != "gather" && plan != "exchange") {
    return InvalidArgument("TESSERA_DETERMINISTIC_PLAN must be auto, keyed, gather or exchange, not '" + plan + "'");
  }
  return Status::Ok();
}

}  // namespace

Status Settings::FromEnvironment(Settings* out, const Lookup& lookup) {
  Lookup get = lookup ? lookup : [](const char* name) -> const char* { return std::getenv(name); };
  Settings s;
#define TESSERA_SETTING_PARSE(type, field, env, def, agree, meaning) \
  if (const char* text = get(env); text != nullptr && *text) {  \
    TESSERA_RETURN_IF_ERROR(Parse(env, text, &s.field));        \
  }
  TESSERA_SETTINGS(TESSERA_SETTING_PARSE)
#undef TESSERA_SETTING_PARSE
  TESSERA_RETURN_IF_ERROR(Validate(s));
  *out = s;
  return Status::Ok();
}

std::vector<SettingInfo> AllSettings() {
  std::vector<SettingInfo> rows;
#define TESSERA_SETTING_ROW(type, field, env, def, agree, meaning) \
  rows.push_back({env, ToText(SettingDefaults::field), agree, meaning});
  TESSERA_SETTINGS(TESSERA_SETTING_ROW)
#undef TESSERA_SETTING_ROW
  return rows;
}

std::string AgreeText(const char* agree) {
  const std::string a = agree;
  if (a == kAgreeNone) return "no";
  if (a == kAgreeAll) return "yes";
  return "where " + a + " is listed";
}

std::string AgreedLines(const Settings& s, const std::vector<std::string>& listed,
                        const std::map<std::string, std::string>& values) {
  auto agreed = [&listed](const char* agree) {
    return std::string(agree) == kAgreeAll || std::find(listed.begin(), listed.end(), agree) != listed.end();
  };
  auto line = [&values](const char* env, const std::string& text) {
    const auto given = values.find(env);
    return std::string(env) + "=" + (given != values.end() ? given->second : text) + "\n";
  };
  std::string lines;
#define TESSERA_SETTING_AGREED(type, field, env, def, agree, meaning) \
  if (agreed(agree)) lines += line(env, ToText(s.field));
  TESSERA_SETTINGS(TESSERA_SETTING_AGREED)
#undef TESSERA_SETTING_AGREED
  return lines;
}

}  // namespace tessera
