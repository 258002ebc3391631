//! Hardware ownership: what the machine has (`inventory`), the one pure
//! allocator that turns a session's needs into a grant of concrete
//! devices (`allocate`), the grant itself (`grant`), the order of sessions
//! waiting for hardware (`queue`) and what runs on the GPUs (`gpu_use`).
//! The server stores each grant in the session's log before any of its
//! processes starts; every sandbox backend enforces it (docs/hardware.md).

pub mod allocate;
pub mod gpu_use;
pub mod grant;
pub mod inventory;
pub mod queue;

pub use allocate::{Decision, Request, allocate};
pub use grant::{DeviceGrant, GrantedGpu, LegacyGrant};
pub use inventory::{Gpu, Inventory, Reserve};
