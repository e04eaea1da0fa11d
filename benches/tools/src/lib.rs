//! The pieces of skyline's side-by-side benchmark tools: query files, outstanding-query
//! bookkeeping, latency histograms, pacing, the shared data set and the result report.
