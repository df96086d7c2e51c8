#include "common/stop.hpp"

#include <atomic>
#include <csignal>

namespace velox {

namespace {

// Lock-free atomics: safe to touch from a signal handler.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<bool> g_output{false};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the stop flag must be async-signal-safe");

extern "C" void on_stop_signal(int sig) {
  if (g_stop.exchange(true)) {
    // The second signal: the user insists. Default action (terminate) now.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal.store(sig);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool stop_requested() { return g_stop.load(); }

void request_stop() { g_stop.store(true); }

void request_output_stop() {
  g_output.store(true);
  g_stop.store(true);
}

bool output_stop_requested() { return g_output.load(); }

std::string stop_reason() {
  if (!g_stop.load()) return "";
  if (g_output.load()) return "output write failures";
  switch (g_signal.load()) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "a stop request from another rank";
  }
}

void clear_stop_request() {
  g_signal.store(0);
  g_output.store(false);
  g_stop.store(false);
}

}  // namespace velox
