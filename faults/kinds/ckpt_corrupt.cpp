// ckpt-corrupt: once the step's checkpoint is complete, one byte of a file in it (file=NAME,
// default the largest) is inverted on disk, as silent storage corruption would. Its checksum in
// trainer_state.json no longer matches: resuming must warn, name the file and use the previous
// checkpoint.
#include <filesystem>
#include <fstream>

#include "faults/faults.h"

namespace ddx::faults {
namespace {

namespace fs = std::filesystem;

class CkptCorrupt : public Kind {
  std::string name() const override { return "ckpt-corrupt"; }
  std::string category() const override { return "storage"; }
  std::string summary() const override { return "invert a byte of the step's checkpoint on disk (file=NAME)"; }
  std::vector<std::string> keys() const override { return {"file"}; }
  void after_checkpoint(const FaultSpec& s, const std::string& folder) const override {
    fs::path target;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (!entry.is_regular_file() || entry.path().filename() == "trainer_state.json") continue;
      if (s.params.count("file") ? entry.path().filename() == s.params.at("file")
                                 : target.empty() || entry.file_size() > fs::file_size(target)) {
        target = entry.path();
      }
    }
    if (target.empty()) s.fail("no file " + s.text_param("file", "") + " in " + folder);
    log_firing(s, "inverting a byte of " + target.string());
    std::fstream f(target, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(target) / 2));
    const char byte = static_cast<char>(~f.get());
    f.seekp(static_cast<std::streamoff>(fs::file_size(target) / 2));
    f.put(byte);
  }
};

}  // namespace

const Kind& ckpt_corrupt_kind() {
  static const CkptCorrupt kind;
  return kind;
}

}  // namespace ddx::faults
