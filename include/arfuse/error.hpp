// What every public header starts from: ARFUSE_API, and the one family of exceptions arfuse
// throws. Every public entry point reports bad input or a failed system, compiler or driver call
// through one of these, never through exit().
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

// What libarfuse exports. The library is built with hidden visibility, so a shared build
// (BUILD_SHARED_LIBS=ON) exports exactly the declarations marked ARFUSE_API.
#define ARFUSE_API __attribute__((visibility("default")))

namespace arfuse {

class ARFUSE_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  // Out of line: the type's identity lives in libarfuse, so an Error thrown there is caught as
  // one in a program that links it (RTTI across the shared library's boundary).
  ~Error() override;
};

// A bad setting: an environment variable, a configuration file or a folder given to use. The
// tools report it as a usage error (exit 2).
class ARFUSE_API ConfigError : public Error {
 public:
  using Error::Error;
};

// A target the chosen compiler cannot build for (refused before any compile is attempted).
class ARFUSE_API UnsupportedTarget : public Error {
 public:
  using Error::Error;
};

// A library, symbol, driver or device that is not there.
class ARFUSE_API Unavailable : public Error {
 public:
  using Error::Error;
};

class ARFUSE_API CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string log, std::string name_expression,
               std::vector<std::string> options)
      : Error(message + "\n--- compiler log ---\n" + log),
        log_(std::move(log)),
        name_expression_(std::move(name_expression)),
        options_(std::move(options)) {}
  const std::string& log() const { return log_; }
  const std::string& name_expression() const { return name_expression_; }
  const std::vector<std::string>& options() const { return options_; }

 private:
  std::string log_;
  std::string name_expression_;
  std::vector<std::string> options_;
};

// A CUDA driver / HIP runtime call that failed; code is the vendor's error number.
class ARFUSE_API DeviceError : public Error {
 public:
  DeviceError(const std::string& message, int code) : Error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// A peer rank did not arrive at a barrier within the group's timeout.
class ARFUSE_API PeerTimeout : public Error {
 public:
  PeerTimeout(const std::string& message, int rank) : Error(message), rank_(rank) {}
  int rank() const { return rank_; }

 private:
  int rank_;
};

// The ranks of a group made different calls (tokens, hidden size, dtype, quant, norm, stage):
// found by the kernels before any rank read a peer's row, so no output was computed from rows
// nobody wrote. `rank` and `peer` are the two ranks whose calls differ.
class ARFUSE_API CallMismatch : public Error {
 public:
  CallMismatch(const std::string& message, int rank, int peer) : Error(message), rank_(rank), peer_(peer) {}
  int rank() const { return rank_; }
  int peer() const { return peer_; }

 private:
  int rank_, peer_;
};

}  // namespace arfuse
