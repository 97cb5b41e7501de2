#pragma once
// The launcher is a child subreaper (PR_SET_CHILD_SUBREAPER): processes that workers started
// and abandoned are reparented to it instead of init. This finds and ends them, so nothing a
// job started survives it, even helpers that left the workers' process group with setsid().

namespace ddx::launcher {

// Makes this process the subreaper of its descendants.
void become_child_subreaper();

// SIGKILLs and reaps every remaining child of this process, repeatedly, until none is left
// (a killed child's own children are reparented here in turn). Returns how many were killed.
int kill_remaining_children();

}  // namespace ddx::launcher
