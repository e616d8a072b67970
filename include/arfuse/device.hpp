// One GPU, its memory, streams, events and graphs, behind types that name no vendor API: the
// CUDA driver or HIP runs underneath (ARFUSE_DEVICE_BACKEND). native() accessors hand out the vendor's handle
// (a CUstream or hipStream_t, a CUevent or hipEvent_t) for interoperation with other libraries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/target.hpp"

namespace arfuse {

using NativeStream = void*;  // CUstream on NVIDIA
using NativeEvent = void*;   // CUevent on NVIDIA

// What a buffer is for: a signal block (barrier flags peers write and spin on) is allocated
// uncached where the vendor needs that for peers' writes to be seen (AMD); ordinary memory
// otherwise.
enum class MemoryKind { ordinary, signal };

// Holds the device's primary context from construction to destruction (a copy holds it too).
class ARFUSE_API Device {
 public:
  // Throws Unavailable when there is no driver or no GPU, Error for a bad ordinal.
  explicit Device(int ordinal = 0);
  Device(const Device& other);
  Device& operator=(const Device&) = delete;
  ~Device();
  static int count();  // 0 when there is no driver or no GPU
  // The vendor runtime the device layer runs on in this process: "CUDA driver" or "HIP".
  static const char* runtime();

  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  const Target& target() const { return target_; }
  int multiprocessors() const { return multiprocessors_; }
  // "0000:19:00.0": names the physical GPU across processes, whatever CUDA_VISIBLE_DEVICES says.
  const std::string& pci_bus_id() const { return pci_bus_id_; }
  // Makes this device's primary context current on the calling thread.
  void make_current() const;
  void make_current_quietly() const;  // for destructors: errors ignored
  // Lets kernels on this device read and write `peer`'s memory; throws Error when the
  // hardware cannot.
  void enable_peer_access(const Device& peer) const;
  // Host-synchronous copies to and from any device pointer this device can reach (its own
  // memory, a peer's mapped buffer); they wait for the copy and for nothing else.
  void copy_to_device(void* device_pointer, const void* host, std::size_t bytes) const;
  void copy_to_host(void* host, const void* device_pointer, std::size_t bytes) const;

 private:
  int ordinal_;
  void* context_ = nullptr;
  std::string name_;
  Target target_ = Target::parse("sm_90");
  int multiprocessors_ = 0;
  std::string pci_bus_id_;
};

class ARFUSE_API DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Device& device, std::size_t bytes, MemoryKind kind = MemoryKind::ordinary);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return pointer_; }
  std::size_t size() const { return bytes_; }
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  void fill(std::uint8_t value);
  template <typename T>
  void upload(const std::vector<T>& host) {
    upload(host.data(), host.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    if (count > 0) download(host.data(), count * sizeof(T));
    return host;
  }

 private:
  const Device* device_ = nullptr;
  void* pointer_ = nullptr;
  std::size_t bytes_ = 0;
};

class Event;

class ARFUSE_API Stream {
 public:
  explicit Stream(const Device& device);
  // A stream that someone else created and destroys (PyTorch's current stream, an engine's):
  // work goes onto it, and this object never destroys it. nullptr is the legacy default stream.
  Stream(const Device& device, NativeStream borrowed) : device_(&device), stream_(borrowed), owned_(false) {}
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  NativeStream native() const { return stream_; }
  void synchronize() const;
  // Whether work enqueued now is captured into a graph (stream capture) rather than run.
  bool capturing() const;
  // Work enqueued after this waits until `event` completes.
  void wait(const Event& event) const;
  // Enqueues a device-to-device copy of `bytes` (either side may be a peer's mapped buffer).
  void copy(void* to, const void* from, std::size_t bytes) const;
  // Enqueues a copy of `rows` rows of `row_bytes` each, from rows `from_pitch` bytes apart to rows
  // `to_pitch` bytes apart.
  void copy_rows(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t row_bytes,
                 std::size_t rows) const;

 private:
  const Device* device_;
  NativeStream stream_ = nullptr;
  bool owned_ = true;
};

class ARFUSE_API Event {
 public:
  explicit Event(const Device& device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& stream);
  void synchronize() const;
  NativeEvent native() const { return event_; }
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_ms_since(const Event& start) const;

 private:
  NativeEvent event_ = nullptr;
};

// A graph captured from the work `record` enqueues on `stream`, instantiated for replay.
class ARFUSE_API Graph {
 public:
  Graph(const Stream& stream, const std::function<void()>& record);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(const Stream& stream) const;

 private:
  void* graph_ = nullptr;
};

}  // namespace arfuse
