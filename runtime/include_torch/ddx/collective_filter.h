#pragma once
// A rank that leaves a collective out: fault injection's skip-collective (faults/) sets a filter
// that the collective layer asks first, before an op is numbered (its group and seq are not set
// yet). When it returns true the op is left out on this rank entirely, as if its caller never
// made it: no sequence number, no record, nothing sent; the caller gets a Work that is done.
// Kept apart from the hooks of ddx/collectives.h so that the many files including it are not
// touched by a test-only switch.
#include "ddx/watchdog/op_record.h"

namespace ddx {

using LeaveOutFilter = bool (*)(const OpRecord& record);
// nullptr removes it. One filter per process.
void set_leave_out_filter(LeaveOutFilter filter);

}  // namespace ddx
