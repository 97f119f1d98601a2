// A node's stage checkpoints saved as one set (Note [Stage set commit]):
// the files of a node that hosts several stages never mix two steps after
// a crash, whatever moment the crash hits.
//
// Note [Stage set commit]: each hosted stage's checkpoint is one file,
// DIR/NAME-stage-S.ckpt, written atomically. A node hosting stages 1 and 2
// that was killed between the two files used to leave stage 1 at the new
// step and stage 2 at the old one: a set its next start refused ("disagree
// on the step"), so a restarted volunteer node crash-looped until someone
// deleted its checkpoints. A save is now a commit:
//   1. every stage is written to its pending name, NAME-stage-S.ckpt.next
//      (each atomically: temp, fsync, rename);
//   2. the commit marker NAME-stages.commit is written (atomically): from
//      here on the new set is complete on disk;
//   3. every pending file is renamed over its stage file (durably);
//   4. the marker is removed.
// At start (and before each save) RecoverStageSet finishes what a crash
// interrupted: with the marker, the pending files left are renamed
// (roll forward: the new set); without it, pending files are deleted (the
// old set stands; they were an unfinished step 1). Either way the stage
// files then hold one step. A node hosting one stage writes its file in
// place (one atomic file is a whole set). The local launcher's restore, which writes the
// stage files itself, discards pending files first (DiscardStageSet) so a
// killed node's interrupted save cannot roll forward over the restored set.
//
//   SS_RETURN_IF_ERROR(RecoverStageSet(dir, name));
//   ...compute->SaveCheckpoint(PendingStageFilePath(dir, name, s)) each s...
//   SS_RETURN_IF_ERROR(CommitStageSet(dir, name));
//
// Thread rule: free functions; one process writes a NAME's files at a time.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_STAGE_SET_COMMIT_H_
#define SKIPSWARM_NODE_DAEMON_STACK_STAGE_SET_COMMIT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace skipswarm::node {

// DIR/NAME-stage-S.ckpt: the stage file a resume loads.
std::string StageFilePath(const std::string& dir, const std::string& name, int stage);
// DIR/NAME-stage-S.ckpt.next: where a save writes before its commit.
std::string PendingStageFilePath(const std::string& dir, const std::string& name, int stage);
// DIR/NAME-stages.commit.
std::string StageSetMarkerPath(const std::string& dir, const std::string& name);

// Steps 2-4 of Note [Stage set commit] for every pending file of NAME.
absl::Status CommitStageSet(const std::string& dir, const std::string& name);

// Finishes or undoes an interrupted save (Note [Stage set commit]).
// Returns what it did, for the log: "" when there was nothing to do, else
// e.g. "finished an interrupted save: 1 stage file(s) moved into place".
absl::StatusOr<std::string> RecoverStageSet(const std::string& dir, const std::string& name);

// Removes NAME's pending files and marker (before the stage files are
// replaced from elsewhere).
absl::Status DiscardStageSet(const std::string& dir, const std::string& name);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_STAGE_SET_COMMIT_H_
