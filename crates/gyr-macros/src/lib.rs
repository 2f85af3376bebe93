//! Derive macros for gyr: `#[derive(Sensor)]` turns a struct into an event type.
//! Use them through the `gyr` crate (`gyr::Sensor`), which re-exports them; everything they
//! expand to is public API of `gyr`.
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

use proc_macro::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr, parse_macro_input};

/// Implements `gyr::Sensor` for a struct with named fields, and adds an inherent `emit()`.
#[proc_macro_derive(Sensor, attributes(sensor))]
pub fn derive_sensor(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let ident = &input.ident;
    let mut name = snake_case(&ident.to_string());
    for attr in &input.attrs {
        if attr.path().is_ident("sensor") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    let lit: LitStr = meta.value()?.parse()?;
                    name = lit.value();
                    Ok(())
                } else {
                    Err(meta
                        .error("unknown sensor attribute; the one supported is `name = \"...\"`"))
                }
            })?;
        }
    }
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => f.named.iter().collect::<Vec<_>>(),
            Fields::Unit => Vec::new(),
            Fields::Unnamed(_) => {
                return Err(syn::Error::new_spanned(
                    ident,
                    "Sensor needs named fields: they name the event's fields",
                ));
            }
        },
        _ => {
            return Err(syn::Error::new_spanned(
                ident,
                "Sensor can be derived for structs only",
            ));
        }
    };
    let names: Vec<_> = fields.iter().map(|f| f.ident.clone().unwrap()).collect();
    let name_strs: Vec<_> = names
        .iter()
        .map(|n| n.to_string().trim_start_matches("r#").to_owned())
        .collect();
    let types: Vec<_> = fields.iter().map(|f| &f.ty).collect();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::gyr::Sensor for #ident #ty_generics #where_clause {
            const NAME: &'static str = #name;
            fn fields() -> ::std::vec::Vec<::gyr::__private::Field> {
                ::std::vec![#(::gyr::__private::Field::new(#name_strs, <#types as ::gyr::SensorField>::TYPE)),*]
            }
            #[inline(always)]
            fn sensor_type() -> &'static ::gyr::__private::SensorType {
                static TYPE: ::gyr::__private::SensorType = ::gyr::__private::SensorType::new();
                &TYPE
            }
            #[inline(always)]
            fn encoded_len(&self) -> usize {
                0 #(+ ::gyr::SensorField::encoded_len(&self.#names))*
            }
            #[inline(always)]
            #[allow(unused_variables, unused_mut)]
            fn encode(&self, out: &mut [u8]) {
                let mut at = 0usize;
                #(at += ::gyr::SensorField::encode(&self.#names, &mut out[at..]);)*
            }
        }
        impl #impl_generics #ident #ty_generics #where_clause {
            /// Records this event, if its sensor is on.
            #[inline(always)]
            #[allow(dead_code)]
            pub fn emit(&self) {
                ::gyr::emit(self)
            }
        }
    })
}
