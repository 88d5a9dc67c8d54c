//! A batch worker SIGKILLed in the middle of its batches (filled in next).
