#![no_std]
#![no_main]
// placeholder: the XDP program lands here
#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
