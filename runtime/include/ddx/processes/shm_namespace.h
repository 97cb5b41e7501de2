#pragma once
// A small /dev/shm for this process and its children only: a private mount namespace with a
// sized tmpfs mounted over /dev/shm. The host's /dev/shm is never touched, and the tmpfs (with
// whatever was written to it) disappears when the last process in the namespace exits.
// Used by `ddx probe buserror` and `ddx launch --shm-size` (the fault matrix's shm-full row).
#include <cstdint>
#include <string>

namespace ddx::shm {

// Needs CAP_SYS_ADMIN (root, or a user namespace that grants it). Returns an empty string on
// success, otherwise why it could not ("unshare(CLONE_NEWNS): Operation not permitted").
// Call before starting threads: unshare() changes the calling thread's namespace only.
std::string shrink_dev_shm(uint64_t bytes);

// Whether shrink_dev_shm would succeed here, tried in a child process so that this one keeps
// its namespace: an empty string, or why not.
std::string private_dev_shm_refused();

}  // namespace ddx::shm
