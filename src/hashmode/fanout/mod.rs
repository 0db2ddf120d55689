//! Safe fan-out: a change of a ConfigMap or Secret that several workloads use rolls them
//! in waves behind a health gate (`waves`), restart windows and pauses hold rollouts as
//! pending (`gates`), and everything decided is kept in `wavelet-state` (`record`).
pub(crate) mod gates;
pub(crate) mod record;
pub(crate) mod waves;
