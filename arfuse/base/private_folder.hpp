// Folders that must hold only what this user put there: the kernel cache (a stranger's entry
// would be loaded as code) and the rendezvous socket's folder (a stranger's socket would receive
// the IPC handles). Both are created 0700 and refused when another user could write them.
#pragma once

#include <string>

namespace arfuse {

// mkdir -p, with mode 0700 for every folder it creates. False with `why` on failure.
bool create_private_folders(const std::string& path, std::string& why);

// A folder owned by this user that neither group nor others can write. False with `why`.
bool is_private_folder(const std::string& path, std::string& why);

}  // namespace arfuse
