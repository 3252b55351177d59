//! Adapters behind the ports: embedded (no AWS) and AWS, and the stand-in for a service a
//! function does not use.

pub mod aws;
pub mod embedded;
