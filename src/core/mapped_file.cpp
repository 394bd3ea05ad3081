#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

namespace kiln {

namespace {
Status io_error(std::string_view what, const std::string& path, std::string_view doing, int err) {
  return Status(StatusCode::kIoError,
                str_cat("cannot ", doing, " the ", what, " file '", path, "': ", std::strerror(err)));
}
}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the regular-file check below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return io_error(what, path, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(what, path, "read", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(StatusCode::kIoError,
                  str_cat("the ", what, " file '", path, "' is not a regular file (a folder, a pipe or a device)"));
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return io_error(what, path, "map", err);
    }
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

bool MappedFile::contains(const void* p) const {
  const auto* begin = static_cast<const char*>(data_);
  return data_ && std::less_equal<const void*>()(begin, p) && std::less<const void*>()(p, begin + size_);
}

void MappedFile::release_pages() const {
  if (size_ > 0) (void)madvise(data_, size_, MADV_DONTNEED);
}

}  // namespace kiln
