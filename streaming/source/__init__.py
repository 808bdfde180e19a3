"""Where each batch reads from: the starting offsets, the checkpoint's log and the batch's ranges; the grouped source's Java."""
