#pragma once
// A whole file mapped read-only into memory (mmap, PROT_READ, MAP_PRIVATE), unmapped when its last owner
// lets go. Tensors over it hold a shared_ptr to it (Tensor::view with an owner).
#include <memory>
#include <string>
#include <string_view>

#include "kiln/status.h"

namespace kiln {

class MappedFile {
 public:
  /// Maps `path`, which must be a regular file (a FIFO or a device is refused, never waited on).
  /// `what` names the file in errors ("engine").
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path, std::string_view what = "file");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// The file's bytes; valid while this object lives. Another process truncating the file meanwhile
  /// makes reads past the new end fault (SIGBUS): engine files are written once and then only read.
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }
  /// True when `p` points into the mapping.
  bool contains(const void* p) const;
  /// Lets the kernel drop the pages read so far (madvise MADV_DONTNEED): they are read from the file again
  /// when touched. After a whole-file checksum, only the parts in use then count in the process's memory.
  void release_pages() const;

 private:
  MappedFile(std::string path, void* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  void* data_;
  size_t size_;
};

}  // namespace kiln
