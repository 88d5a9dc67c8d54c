//! Batches with what else exists (filled in next).
