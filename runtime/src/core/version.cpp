// Versions known without LibTorch; the LibTorch side is torch_versions() in ddx_dist.
#include "ddx/version.h"

#include <mpi.h>

namespace ddx {

const char* ddx_version() { return DDX_VERSION; }

std::vector<std::pair<std::string, std::string>> version_report() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("ddx", DDX_VERSION);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  // MPI_Get_library_version may be called before MPI_Init.
  MPI_Get_library_version(mpi, &length);
  std::string mpi_text(mpi, static_cast<size_t>(length));
  if (auto nl = mpi_text.find('\n'); nl != std::string::npos) mpi_text.resize(nl);
  out.emplace_back("mpi", mpi_text);
#if defined(__clang__)
  out.emplace_back("compiler", std::string("clang ") + __clang_version__);
#elif defined(__GNUC__)
  out.emplace_back("compiler", std::string("g++ ") + __VERSION__);
#endif
  out.emplace_back("c++", std::to_string(__cplusplus));
  return out;
}

}  // namespace ddx
