//! The admin page(s). (Being written.)

use poem::Route;

pub fn routes() -> Route {
    Route::new()
}
