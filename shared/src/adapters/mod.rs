//! Adapters behind the ports: embedded (no AWS) and AWS.

pub mod aws;
pub mod embedded;
