// Linked into the packaged binaries when libstdc++ is linked statically (FLASHCORE_STATIC_LIBSTDCXX,
// cmake/package.cmake). libstdc++.a built against glibc >= 2.36 calls arc4random (std::random_device,
// pulled in with std::mt19937's instantiations), which would raise the wheel's glibc floor to 2.36
// and shut out Ubuntu 22.04 (2.35) and RHEL 9 (2.34). This private definition, from getrandom()
// (glibc 2.25), satisfies that reference inside the binary instead.
#include <sys/random.h>

#include <cstdint>
#include <cstdlib>

extern "C" __attribute__((visibility("hidden"))) std::uint32_t arc4random(void) {
  std::uint32_t value = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(&value);
  std::size_t filled = 0;
  while (filled < sizeof value) {
    const ssize_t got = getrandom(bytes + filled, sizeof value - filled, 0);
    if (got < 0) std::abort();  // as glibc's arc4random does when the kernel cannot give entropy
    filled += static_cast<std::size_t>(got);
  }
  return value;
}
