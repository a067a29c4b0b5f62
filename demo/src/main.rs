//! The nresilience demo: a frontend -> backend -> db chain.

fn main() {
    println!("nresilience demo: the frontend -> backend -> db chain is not built yet");
}
