// Clean stops (common/stop.hpp): SIGTERM and SIGINT become a stop request that the job loop
// polls (mpi/driver.cpp); the integration test test_signals.sh stops real MPI jobs.
#include <catch2/catch.hpp>
#include <csignal>

#include "common/stop.hpp"

using namespace velox;

TEST_CASE("SIGTERM and SIGINT are recorded as a stop request instead of ending the process",
          "[stop]") {
  install_stop_handlers();
  clear_stop_request();
  CHECK_FALSE(stop_requested());
  CHECK(stop_reason().empty());
  std::raise(SIGTERM);  // the process goes on: only the request is recorded
  CHECK(stop_requested());
  CHECK(stop_reason() == "SIGTERM");
  clear_stop_request();
  std::raise(SIGINT);
  CHECK(stop_reason() == "SIGINT");
  clear_stop_request();
  request_stop();  // what rank 0 does when a worker reports its signal
  CHECK(stop_reason() == "a stop request from another rank");
  clear_stop_request();
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
}
